//! `GET /metrics`: what the daemon did since it started and what waits now, in the
//! Prometheus text exposition format (version 0.0.4). Behind the bearer token unless
//! `[metrics] public = true`.

use crate::AppState;
use crate::error::ApiError;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use reef_runtime::TOOL_SECONDS_BUCKETS;
use reef_store::PendingStatus;
use std::collections::BTreeMap;

pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AppState>) -> Result<Response, ApiError> {
    let rt = &state.runtime;
    let store = rt.store();
    let counts = rt.counts();
    let agents = rt.list_agents().await?;
    let depths = store.inbox_depths().await?;
    let (queued, running) = store.inbox_counts().await?;
    let pending = rt.list_pending(false).await?;

    let mut out = Text::default();
    out.family(
        "reef_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
    );
    out.sample("reef_uptime_seconds", &[], rt.uptime().as_secs_f64());

    out.family("reef_agents", "gauge", "Agents by state.");
    let mut by_state: BTreeMap<&str, u64> = BTreeMap::new();
    for agent in &agents {
        *by_state.entry(agent.state.as_str()).or_default() += 1;
    }
    for (agent_state, n) in by_state {
        out.sample("reef_agents", &[("state", agent_state)], n as f64);
    }

    out.family(
        "reef_inbox_depth",
        "gauge",
        "Messages waiting in an agent's inbox.",
    );
    let names: BTreeMap<_, _> = agents.iter().map(|a| (&a.id, a.name.as_str())).collect();
    for (id, depth) in &depths {
        let name = names.get(id).copied().unwrap_or(id.as_str());
        out.sample("reef_inbox_depth", &[("agent", name)], *depth as f64);
    }
    out.family(
        "reef_messages_queued",
        "gauge",
        "Messages waiting in all inboxes.",
    );
    out.sample("reef_messages_queued", &[], queued as f64);
    out.family("reef_turns_running", "gauge", "Turns running now.");
    out.sample("reef_turns_running", &[], running as f64);

    out.family(
        "reef_pending",
        "gauge",
        "Questions and approvals waiting for the operator.",
    );
    let mut by_kind: BTreeMap<&str, u64> = BTreeMap::new();
    for item in pending
        .iter()
        .filter(|i| i.status == PendingStatus::Pending)
    {
        *by_kind.entry(item.kind.as_str()).or_default() += 1;
    }
    for (kind, n) in &by_kind {
        out.sample("reef_pending", &[("kind", kind)], *n as f64);
    }

    out.family(
        "reef_turns_total",
        "counter",
        "Turns ended, by how they ended.",
    );
    for (outcome, n) in &counts.turns {
        out.sample("reef_turns_total", &[("outcome", outcome)], *n as f64);
    }

    // Each family whole, one after another, as the format wants.
    out.family("reef_model_requests_total", "counter", "Model requests.");
    for ((provider, model), m) in &counts.models {
        let labels = [("provider", provider.as_str()), ("model", model.as_str())];
        out.sample("reef_model_requests_total", &labels, m.requests as f64);
    }
    out.family(
        "reef_model_tokens_total",
        "counter",
        "Tokens of model requests.",
    );
    for ((provider, model), m) in &counts.models {
        for (kind, n) in [
            ("input", m.input_tokens),
            ("output", m.output_tokens),
            ("cached_input", m.cached_input_tokens),
        ] {
            let labels = [
                ("provider", provider.as_str()),
                ("model", model.as_str()),
                ("type", kind),
            ];
            out.sample("reef_model_tokens_total", &labels, n as f64);
        }
    }
    out.family(
        "reef_model_cost_usd_total",
        "counter",
        "US dollars of priced requests.",
    );
    for ((provider, model), m) in &counts.models {
        let labels = [("provider", provider.as_str()), ("model", model.as_str())];
        out.sample(
            "reef_model_cost_usd_total",
            &labels,
            m.cost_micros as f64 / 1e6,
        );
    }

    out.family(
        "reef_tool_calls_total",
        "counter",
        "Tool calls, by tool and result.",
    );
    for (tool, t) in &counts.tools {
        for (result, n) in [("ok", t.calls - t.errors), ("error", t.errors)] {
            let labels = [("tool", tool.as_str()), ("result", result)];
            out.sample("reef_tool_calls_total", &labels, n as f64);
        }
    }
    out.family(
        "reef_tool_duration_seconds",
        "histogram",
        "Time from a tool call's start to its result.",
    );
    for (tool, t) in &counts.tools {
        for (bound, n) in TOOL_SECONDS_BUCKETS.iter().zip(t.buckets) {
            let le = bound.to_string();
            let labels = [("tool", tool.as_str()), ("le", le.as_str())];
            out.sample("reef_tool_duration_seconds_bucket", &labels, n as f64);
        }
        let timed = t.timed as f64;
        let labels = [("tool", tool.as_str()), ("le", "+Inf")];
        out.sample("reef_tool_duration_seconds_bucket", &labels, timed);
        out.sample(
            "reef_tool_duration_seconds_sum",
            &[("tool", tool)],
            t.seconds,
        );
        out.sample("reef_tool_duration_seconds_count", &[("tool", tool)], timed);
    }

    out.family(
        "reef_sandbox_spawns_total",
        "counter",
        "Processes agents' tools started in the sandbox.",
    );
    out.sample(
        "reef_sandbox_spawns_total",
        &[],
        counts.sandbox_spawns as f64,
    );
    out.family(
        "reef_lost_events_total",
        "counter",
        "Events that could not be written to the history.",
    );
    out.sample("reef_lost_events_total", &[], rt.lost_events() as f64);

    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], out.0).into_response())
}

/// The exposition text being written.
#[derive(Default)]
struct Text(String);

impl Text {
    /// A metric family's `HELP` and `TYPE` lines (its samples may come later).
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        self.0
            .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                self.0.push_str(&format!("{key}=\"{}\"", escape(value)));
            }
            self.0.push('}');
        }
        self.0.push_str(&format!(" {value}\n"));
    }
}

/// A label value as the format wants it: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut text = Text::default();
        text.sample("m", &[("a", "x\"y\\z\nw")], 1.5);
        assert_eq!(text.0, "m{a=\"x\\\"y\\\\z\\nw\"} 1.5\n");
    }
}
