//! Benchmark: the turn engine's own overhead per round, against an instant mock model.
//!
//! Baseline: the same two model requests per turn sent straight through the `reef-llm` client.
//! Measured: full turns through `Session::run_turn` (context assembly, event emission, SQLite
//! writes in WAL mode, tool dispatch on a task), with an in-process tool (`read_file`) and
//! with a sandboxed process (`shell` running `true`). Both sides talk to the same kind of mock
//! server over loopback, so the difference is reef's own work. Run with
//! `cargo bench -p reef-agent --bench round_overhead`.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark reports on stdout and aborts on setup failure"
)]

use reef_agent::{Session, SessionOptions};
use reef_core::{Message, ModelClient, ModelRequest, ToolCall, ToolCallId, WireApi};
use reef_llm::ProviderSettings;
use reef_sandbox::{Sandbox, SandboxPolicy};
use reef_store::Store;
use reef_test_support::{MockLlm, MockReply};
use reef_tools::{BuiltinConfig, ToolRegistry};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TURNS: usize = 300;
const WARMUP: usize = 30;

fn client(mock: &MockLlm) -> Arc<dyn ModelClient> {
    reef_llm::build_client(ProviderSettings {
        name: "bench".into(),
        wire_api: WireApi::OpenaiChat,
        base_url: mock.base_url(),
        model: "mock".into(),
        max_retries: 0,
        ..ProviderSettings::default()
    })
    .unwrap()
}

fn script(turns: usize, tool: &str, args: &Value) -> Vec<MockReply> {
    (0..turns)
        .flat_map(|_| {
            [
                MockReply::tool_call(tool, args.clone()),
                MockReply::text("done"),
            ]
        })
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Two raw requests per turn, shaped like the agent's: the prompt, then prompt + call + result.
async fn baseline(tools: &ToolRegistry, tool: &str, args: &Value, n: usize) -> Vec<Duration> {
    let mock = MockLlm::start(script(n, tool, args)).await;
    let model = client(&mock);
    let specs = tools.specs();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let mut messages = vec![
            Message::system("You are a reef agent."),
            Message::user("go"),
        ];
        let first = model
            .complete(
                &ModelRequest {
                    messages: messages.clone(),
                    tools: specs.clone(),
                    max_output_tokens: None,
                    ..Default::default()
                },
                &|_| {},
            )
            .await
            .unwrap();
        messages.push(Message::Assistant {
            content: first.content,
            tool_calls: first.tool_calls.clone(),
        });
        let call: &ToolCall = &first.tool_calls[0];
        messages.push(Message::Tool {
            call_id: ToolCallId::from(call.id.as_str()),
            name: call.name.clone(),
            content: "hello".into(),
            is_error: false,
        });
        model
            .complete(
                &ModelRequest {
                    messages,
                    tools: specs.clone(),
                    max_output_tokens: None,
                    ..Default::default()
                },
                &|_| {},
            )
            .await
            .unwrap();
        times.push(start.elapsed());
    }
    times
}

/// Full turns through the engine, each in a fresh session so context size matches the baseline.
async fn engine(tools: Arc<ToolRegistry>, tool: &str, args: &Value, n: usize) -> Vec<Duration> {
    let mock = MockLlm::start(script(n, tool, args)).await;
    let model = client(&mock);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("note.txt"), "hello").unwrap();
    let store = Store::open(&dir.path().join("reef.db")).unwrap();
    let opts = SessionOptions {
        workspace: dir.path().to_owned(),
        agent: "main".into(),
        notes_max_chars: 0,
        max_rounds: 25,
        max_wall: Duration::from_secs(60),
        inline_output_chars: 2000,
        system_prompt: None,
        persona: None,
        token_budget: None,
        loop_limit: 0,
        cost_budget_micros: None,
        prices: std::sync::Arc::new(reef_llm::Prices::defaults()),
        compact_at: 0.75,
        compaction: reef_core::CompactionStrategy::Summarize,
        keep_recent_turns: 4,
        profile: reef_core::AgentProfile::Auto,
        hidden: Vec::new(),
        safety: Default::default(),
    };
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
        let start = Instant::now();
        let mut session =
            Session::create(model.clone(), tools.clone(), store.clone(), opts.clone())
                .await
                .unwrap();
        let outcome = session.run_turn("sub_bench".into(), "go".into(), tx).await;
        times.push(start.elapsed());
        assert!(
            matches!(outcome, reef_core::TurnOutcome::Completed { .. }),
            "{outcome:?}"
        );
        drop(session);
        drain.await.unwrap();
    }
    times
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tools = Arc::new(reef_tools::builtin_registry(
        Arc::new(Sandbox::new(SandboxPolicy::default())),
        BuiltinConfig::default(),
    ));
    let cases = [
        (
            "read_file (in-process tool)",
            "read_file",
            json!({"path": "note.txt"}),
        ),
        (
            "shell `true` (sandboxed process)",
            "shell",
            json!({"command": "true"}),
        ),
    ];
    println!("reef round overhead: {TURNS} turns of 2 rounds each, medians per round");
    println!(
        "{:<34} {:>12} {:>12} {:>12} {:>7}",
        "tool", "baseline", "engine", "overhead", "ratio"
    );
    rt.block_on(async {
        for (label, tool, args) in &cases {
            baseline(&tools, tool, args, WARMUP).await;
            engine(tools.clone(), tool, args, WARMUP).await;
            // Interleave blocks so drift on a shared machine hits both sides alike.
            let (mut base, mut eng) = (Vec::new(), Vec::new());
            for _ in 0..3 {
                base.extend(baseline(&tools, tool, args, TURNS / 3).await);
                eng.extend(engine(tools.clone(), tool, args, TURNS / 3).await);
            }
            let b = median(base) / 2;
            let e = median(eng) / 2;
            let overhead = e.saturating_sub(b);
            println!(
                "{label:<34} {:>10.0}µs {:>10.0}µs {:>10.0}µs {:>6.2}x",
                b.as_secs_f64() * 1e6,
                e.as_secs_f64() * 1e6,
                overhead.as_secs_f64() * 1e6,
                e.as_secs_f64() / b.as_secs_f64()
            );
        }
    });
}
