//! What a compaction adds to the turn that triggers it. An instant in-process model with a
//! 4,096-token window answers every request; each turn sends ~500 tokens, so compactions come
//! every turn or two. Turns that compacted are compared with turns that did not, in the same
//! run: with `truncate` (no model request) the difference is the compaction's own cost —
//! planning, measuring, the store record, rebuilding the context; with `summarize` it adds
//! the (instant) summary request.
//!
//! Run: `cargo bench -p reef-agent --bench compaction`.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark binary prints its report and fails loudly"
)]

use async_trait::async_trait;
use reef_agent::{Session, SessionOptions, ToolRegistry};
use reef_core::{
    CompactionStrategy, EventMsg, ModelClient, ModelError, ModelRequest, ModelResponse, OnStream,
    Op, StopReason, Usage,
};
use reef_store::Store;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TURNS: usize = 400;

/// Answers at once; reports a quarter of the request's characters as its input tokens.
struct Instant0;

#[async_trait]
impl ModelClient for Instant0 {
    fn provider(&self) -> &str {
        "instant"
    }

    fn model(&self) -> &str {
        "instant"
    }

    fn context_tokens(&self) -> Option<u32> {
        Some(4096)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _on_event: &OnStream<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let chars: usize = request.messages.iter().map(|m| m.content().len()).sum();
        Ok(ModelResponse {
            content: "ok".into(),
            tool_calls: Vec::new(),
            usage: Usage {
                input_tokens: chars as u64 / 4,
                output_tokens: 1,
                cached_input_tokens: 0,
            },
            stop_reason: StopReason::EndTurn,
            model: "instant".into(),
            served_by: None,
        })
    }
}

fn options(workspace: &std::path::Path, strategy: CompactionStrategy) -> SessionOptions {
    SessionOptions {
        workspace: workspace.to_owned(),
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
        prices: Arc::new(reef_llm::Prices::defaults()),
        compact_at: 0.75,
        compaction: strategy,
        keep_recent_turns: 4,
        profile: reef_core::AgentProfile::Auto,
        hidden: Vec::new(),
        safety: Default::default(),
    }
}

/// Turn times, split by whether the turn compacted.
async fn run(strategy: CompactionStrategy) -> (Vec<Duration>, Vec<Duration>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("reef.db")).unwrap();
    let session = Session::create(
        Arc::new(Instant0),
        Arc::new(ToolRegistry::default()),
        store,
        options(dir.path(), strategy),
    )
    .await
    .unwrap();
    let mut handle = reef_agent::spawn(session);
    let (mut plain, mut compacting) = (Vec::new(), Vec::new());
    let text = "lorem ipsum dolor sit amet ".repeat(74);
    for n in 0..TURNS {
        let start = Instant::now();
        handle.submit(Op::UserInput {
            text: format!("{n}: {text}"),
        });
        let mut compacted = false;
        while let Some(event) = handle.next_event().await {
            match event.msg {
                EventMsg::ContextCompacted { .. } => compacted = true,
                EventMsg::TurnEnded { .. } => break,
                _ => {}
            }
        }
        let took = start.elapsed();
        if compacted {
            compacting.push(took);
        } else {
            plain.push(took);
        }
    }
    plain.sort();
    compacting.sort();
    (plain, compacting)
}

fn median(sorted: &[Duration]) -> Duration {
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    for strategy in [CompactionStrategy::Truncate, CompactionStrategy::Summarize] {
        let (plain, compacting) = run(strategy).await;
        let added = median(&compacting).saturating_sub(median(&plain));
        println!(
            "{}: {} turns without compaction, median {:.3} ms; {} with, median {:.3} ms; \
             a compaction adds {:.3} ms",
            strategy.as_str(),
            plain.len(),
            ms(median(&plain)),
            compacting.len(),
            ms(median(&compacting)),
            ms(added)
        );
    }
}
