//! Counters of what the daemon's agents did since it started (turns, model requests, tokens,
//! cost, tool calls and how long they took, sandboxed processes), kept from the sessions'
//! own reports, for `/metrics`. Counters start at zero with the process, as Prometheus
//! expects; what is in the store (inboxes, questions) is read when asked.

use reef_core::{AgentId, EventMsg};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Upper bounds (seconds) of the tool latency histogram's buckets.
pub const TOOL_SECONDS_BUCKETS: [f64; 12] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Distinct tool names counted at most; calls of tools beyond them count as `other` (a model
/// can name any tool, and each name would be a series forever).
const TOOL_NAMES: usize = 256;

/// Calls still running whose start is remembered at most (a session that never reports
/// the end of its calls cannot grow this without bound).
const OPEN_CALLS: usize = 4096;

/// Requests to one provider's model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelCounts {
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub cost_micros: u64,
}

/// Calls of one tool, and their latency histogram.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolCounts {
    pub calls: u64,
    pub errors: u64,
    /// Calls at or under each of [`TOOL_SECONDS_BUCKETS`] (cumulative, as Prometheus has it).
    pub buckets: [u64; TOOL_SECONDS_BUCKETS.len()],
    /// Calls whose start was seen (the histogram's count).
    pub timed: u64,
    pub seconds: f64,
}

/// Everything counted so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    /// Turns by how they ended (`completed`, `failed`, …).
    pub turns: BTreeMap<String, u64>,
    /// By (provider, model).
    pub models: BTreeMap<(String, String), ModelCounts>,
    /// By tool name.
    pub tools: BTreeMap<String, ToolCounts>,
    /// Processes agents' tools started in the sandbox.
    pub sandbox_spawns: u64,
}

#[derive(Default)]
struct State {
    counts: Counts,
    open: HashMap<(AgentId, reef_core::ToolCallId), Instant>,
}

/// The daemon's counters.
#[derive(Default)]
pub(crate) struct Meter {
    state: Mutex<State>,
    /// Shared with every agent's sandbox.
    pub spawns: Arc<AtomicU64>,
}

impl Meter {
    /// Counts what a session reported.
    pub(crate) fn observe(&self, agent: &AgentId, msg: &EventMsg) {
        // Streamed text passes here once per token: leave it without taking the lock.
        if !matches!(
            msg,
            EventMsg::TurnEnded { .. }
                | EventMsg::Usage { .. }
                | EventMsg::ToolCallBegin { .. }
                | EventMsg::ToolCallEnd { .. }
        ) {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match msg {
            EventMsg::TurnEnded { outcome, .. } => {
                let status = serde_json::to_value(outcome)
                    .ok()
                    .and_then(|v| v["status"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "unknown".to_owned());
                *state.counts.turns.entry(status).or_default() += 1;
            }
            EventMsg::Usage {
                provider,
                model,
                usage,
                cost_micros,
            } => {
                let m = state
                    .counts
                    .models
                    .entry((provider.clone(), model.clone()))
                    .or_default();
                m.requests += 1;
                m.input_tokens += usage.input_tokens;
                m.output_tokens += usage.output_tokens;
                m.cached_input_tokens += usage.cached_input_tokens;
                m.cost_micros += cost_micros.unwrap_or(0);
            }
            EventMsg::ToolCallBegin { call_id, .. } => {
                if state.open.len() >= OPEN_CALLS {
                    state.open.clear();
                }
                state
                    .open
                    .insert((agent.clone(), call_id.clone()), Instant::now());
            }
            EventMsg::ToolCallEnd {
                call_id,
                name,
                is_error,
                ..
            } => {
                let began = state.open.remove(&(agent.clone(), call_id.clone()));
                let tools = &mut state.counts.tools;
                let key = if tools.contains_key(name) || tools.len() < TOOL_NAMES {
                    name.clone()
                } else {
                    "other".to_owned()
                };
                let tool = tools.entry(key).or_default();
                tool.calls += 1;
                tool.errors += u64::from(*is_error);
                if let Some(began) = began {
                    let secs = began.elapsed().as_secs_f64();
                    tool.timed += 1;
                    tool.seconds += secs;
                    for (bound, count) in TOOL_SECONDS_BUCKETS.iter().zip(&mut tool.buckets) {
                        if secs <= *bound {
                            *count += 1;
                        }
                    }
                }
            }
            _ => {}
        }
    }

    pub(crate) fn counts(&self) -> Counts {
        let mut counts = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .counts
            .clone();
        counts.sandbox_spawns = self.spawns.load(Ordering::Relaxed);
        counts
    }
}

impl crate::kernel::Runtime {
    /// What the daemon's agents did since it started.
    pub fn counts(&self) -> Counts {
        self.inner.meter.counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reef_core::{TurnOutcome, Usage};

    #[test]
    fn turns_requests_and_tool_calls_are_counted() {
        let meter = Meter::default();
        let agent = AgentId::new();
        meter.observe(
            &agent,
            &EventMsg::ToolCallBegin {
                call_id: "c1".into(),
                name: "shell".into(),
                arguments: "{}".into(),
            },
        );
        meter.observe(
            &agent,
            &EventMsg::ToolCallEnd {
                call_id: "c1".into(),
                name: "shell".into(),
                output: String::new(),
                is_error: true,
                saved_to: None,
            },
        );
        meter.observe(
            &agent,
            &EventMsg::Usage {
                provider: "main".into(),
                model: "m".into(),
                usage: Usage {
                    input_tokens: 7,
                    output_tokens: 3,
                    cached_input_tokens: 2,
                },
                cost_micros: Some(40),
            },
        );
        meter.observe(
            &agent,
            &EventMsg::TurnEnded {
                outcome: TurnOutcome::Interrupted,
                rounds: 1,
                usage: Usage::default(),
            },
        );
        let counts = meter.counts();
        assert_eq!(counts.turns.get("interrupted"), Some(&1));
        let model = &counts.models[&("main".to_owned(), "m".to_owned())];
        assert_eq!(
            (model.requests, model.input_tokens, model.cost_micros),
            (1, 7, 40)
        );
        let shell = &counts.tools["shell"];
        assert_eq!((shell.calls, shell.errors, shell.timed), (1, 1, 1));
        assert_eq!(
            shell.buckets.last(),
            Some(&1),
            "every call is under the last bound"
        );
    }
}
