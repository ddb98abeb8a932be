//! Integration tests of the turn engine against the mock model, real tools and an in-memory store.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod budgets;
mod compaction;
mod interrupt;
mod memory;
mod outputs;
mod resume;
mod setup;
mod skills;
mod small;

use reef_agent::{Session, SessionOptions};
use reef_core::{Event, EventMsg, WireApi};
use reef_llm::ProviderSettings;
use reef_sandbox::{HelperCommand, Sandbox, SandboxBackend, SandboxPolicy};
use reef_store::Store;
use reef_test_support::MockLlm;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub(crate) fn options(workspace: &Path) -> SessionOptions {
    SessionOptions {
        workspace: workspace.to_owned(),
        agent: "main".into(),
        notes_max_chars: 0,
        max_rounds: 25,
        max_wall: Duration::from_secs(600),
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
    }
}

pub(crate) async fn session(mock: &MockLlm, store: &Store, opts: SessionOptions) -> Session {
    session_with_retries(mock, store, opts, 0).await
}

pub(crate) async fn session_with_retries(
    mock: &MockLlm,
    store: &Store,
    opts: SessionOptions,
    max_retries: u32,
) -> Session {
    let model = mock_model(
        mock,
        max_retries,
        ProviderSettings::default().context_tokens,
    );
    let tools = Arc::new(reef_tools::builtin_registry(
        // Tools run in the real default sandbox, as they do for users.
        Arc::new(Sandbox::new(SandboxPolicy {
            backend: SandboxBackend::Landlock,
            helper: Some(HelperCommand {
                program: reef_test_support::sandbox_helper(),
                args: Vec::new(),
            }),
            ..SandboxPolicy::default()
        })),
        reef_tools::BuiltinConfig::default(),
    ));
    Session::create(model, tools, store.clone(), opts)
        .await
        .unwrap()
}

/// An OpenAI-wire client of `mock` with a `window`-token context.
pub(crate) fn mock_model(
    mock: &MockLlm,
    max_retries: u32,
    window: u32,
) -> Arc<dyn reef_core::ModelClient> {
    reef_llm::build_client(ProviderSettings {
        name: "mock".into(),
        wire_api: WireApi::OpenaiChat,
        base_url: mock.base_url(),
        model: "mock-model".into(),
        max_retries,
        retry_base: Duration::from_millis(1),
        context_tokens: window,
        ..ProviderSettings::default()
    })
    .unwrap()
}

/// Reads events until one matches `pred`, returning everything read.
pub(crate) async fn until(
    handle: &mut reef_agent::AgentHandle,
    pred: impl Fn(&EventMsg) -> bool,
) -> Vec<Event> {
    let mut seen = Vec::new();
    while let Some(event) = handle.next_event().await {
        let done = pred(&event.msg);
        seen.push(event);
        if done {
            return seen;
        }
    }
    panic!("event stream ended before the expected event: {seen:?}");
}

/// Polls a condition a bounded number of times (for effects in other processes).
pub(crate) async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..400 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// A `sleep` argument unique to this test process and call, to find the sleeping tool on the
/// host (pids printed inside the sandbox belong to its own PID namespace).
pub(crate) fn sleep_marker() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}.{n:03}", 100_000 + std::process::id())
}

/// Host processes (zombies excluded) whose command line holds `marker`.
pub(crate) fn processes_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(marker) && !stat.contains(") Z ")
        })
        .collect()
}
