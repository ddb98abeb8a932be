//! The daemon's numbers in one run: RSS idle and with 1,000 idle agents, spawn latency, and
//! messages per second through inboxes, turns and the bus with an instant in-process model.
//! Each figure comes with a baseline measured in the same process (the bare store operation
//! underneath), so the ratio is what to compare across machines.
//!
//! Run: `cargo bench -p reef-runtime --bench daemon`.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark binary prints its report and fails loudly"
)]

use async_trait::async_trait;
use reef_config::{Config, LoadOptions};
use reef_core::{
    AgentId, Budget, Capabilities, ModelClient, ModelError, ModelRequest, ModelResponse, OnStream,
    StopReason, Usage,
};
use reef_runtime::{Runtime, RuntimeOptions, Sender, SpawnRequest, Templates};
use reef_store::{NewAgent, Store};
use std::sync::Arc;
use std::time::{Duration, Instant};

const AGENTS: usize = 1000;
const BUSY_AGENTS: usize = 50;
const MESSAGES: usize = 2000;

/// Answers every request at once.
struct Instant0;

#[async_trait]
impl ModelClient for Instant0 {
    fn provider(&self) -> &str {
        "instant"
    }

    fn model(&self) -> &str {
        "instant"
    }

    async fn complete(
        &self,
        _request: &ModelRequest,
        _on_event: &OnStream<'_>,
    ) -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse {
            content: "ok".into(),
            tool_calls: Vec::new(),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 1,
                cached_input_tokens: 0,
            },
            stop_reason: StopReason::EndTurn,
            model: "instant".into(),
            served_by: None,
        })
    }
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join(".reef");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("reef.toml"),
        "[sandbox]\nbackend = \"none\"\n[daemon]\nmax_concurrent_turns = 8\n",
    )
    .unwrap();
    let config = Config::load(&LoadOptions {
        home: home.clone(),
        project_dir: None,
        env: Default::default(),
        overrides: Vec::new(),
    })
    .unwrap();

    // Baseline: the bare store insert under every spawn, in a separate database.
    let base_store = Store::open(&dir.path().join("baseline.db")).unwrap();
    let mut base = Vec::with_capacity(AGENTS);
    for i in 0..AGENTS {
        let t = Instant::now();
        base_store
            .create_agent(NewAgent {
                id: AgentId::new(),
                name: format!("b{i}"),
                template: "worker".into(),
                persona: String::new(),
                model: None,
                workspace: String::new(),
                capabilities: Capabilities::default(),
                budget: Budget::default(),
                parent: None,
                ephemeral: false,
            })
            .await
            .unwrap();
        base.push(t.elapsed());
    }
    drop(base_store);

    let rss_before = rss_kib();
    let (runtime, _) = Runtime::start(RuntimeOptions {
        config,
        templates: Templates::builtin().unwrap(),
        helper: None,
        model_override: Some(Arc::new(Instant0)),
        clock: None,
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_idle = rss_kib();

    let mut spawn = Vec::with_capacity(AGENTS);
    for i in 0..AGENTS {
        let t = Instant::now();
        runtime
            .spawn_agent(
                SpawnRequest {
                    name: format!("a{i}"),
                    template: "quick".into(),
                    ..SpawnRequest::default()
                },
                None,
            )
            .await
            .unwrap();
        spawn.push(t.elapsed());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_agents = rss_kib();

    // Baseline for throughput: bare durable deliveries.
    let agents = runtime.list_agents().await.unwrap();
    let raw_target = &agents[AGENTS - 1];
    runtime
        .pause_agent(&raw_target.name, "baseline target")
        .await
        .unwrap();
    let t = Instant::now();
    for i in 0..MESSAGES {
        runtime
            .store()
            .deliver(&raw_target.id, "bench", "hello", &format!("raw-{i}"))
            .await
            .unwrap();
    }
    let raw_rate = MESSAGES as f64 / t.elapsed().as_secs_f64();

    // Messages through the whole path: inbox → worker → turn (instant model) → events → bus.
    // A subscriber counts finished turns as they are published; should it fall behind the
    // bus's live buffer, it counts the rest from the history, which the bus publishes from.
    let start_seq = runtime.store().last_event_seq().await.unwrap();
    let mut live = runtime.bus().subscribe();
    let counter = tokio::spawn(async move {
        let mut ended = 0;
        while ended < MESSAGES {
            match live.recv().await {
                Ok(event) if event.kind == "turn.ended" => ended += 1,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        true
    });
    let t = Instant::now();
    for i in 0..MESSAGES {
        let to = format!("a{}", i % BUSY_AGENTS);
        runtime
            .send_message(&to, Sender::Operator, "hello", &format!("m-{i}"), None)
            .await
            .unwrap();
    }
    if !counter.await.unwrap() {
        println!("  (the live subscriber fell behind; counting from the history)");
        loop {
            let events = runtime
                .store()
                .events_after(start_seq, None, usize::MAX)
                .await
                .unwrap();
            if events.iter().filter(|e| e.kind == "turn.ended").count() >= MESSAGES {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let elapsed = t.elapsed();
    let rate = MESSAGES as f64 / elapsed.as_secs_f64();
    let rss_busy = rss_kib();
    runtime.shutdown().await;

    spawn.sort();
    base.sort();
    let mean = |v: &[Duration]| v.iter().sum::<Duration>() / v.len() as u32;
    println!("reef daemon benchmark");
    println!("  RSS before the runtime        {:>8} KiB", rss_before);
    println!("  RSS idle daemon               {:>8} KiB", rss_idle);
    println!(
        "  RSS with {AGENTS} idle agents      {:>8} KiB  (+{} KiB, {:.2} KiB/agent)",
        rss_agents,
        rss_agents.saturating_sub(rss_idle),
        rss_agents.saturating_sub(rss_idle) as f64 / AGENTS as f64
    );
    println!("  RSS after the message run     {:>8} KiB", rss_busy);
    println!(
        "  spawn latency                 mean {:.3} ms  p50 {:.3} ms  p99 {:.3} ms",
        ms(mean(&spawn)),
        ms(percentile(&spawn, 0.5)),
        ms(percentile(&spawn, 0.99))
    );
    println!(
        "  baseline: bare agent insert   mean {:.3} ms  p50 {:.3} ms  → spawn/insert {:.2}×",
        ms(mean(&base)),
        ms(percentile(&base, 0.5)),
        mean(&spawn).as_secs_f64() / mean(&base).as_secs_f64()
    );
    println!(
        "  messages through the daemon   {rate:.0} msg/s ({MESSAGES} messages to {BUSY_AGENTS} agents, \
         each a full turn, in {:.2} s)",
        elapsed.as_secs_f64()
    );
    println!(
        "  baseline: bare inbox delivery {raw_rate:.0} msg/s  → daemon/delivery {:.2}×",
        rate / raw_rate
    );
}
