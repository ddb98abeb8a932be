//! Recording a worker's progress in the event history: the session's protocol events
//! translated to daemon events, and the worker's own. A failed write is logged and counted
//! (`Runtime::lost_events`); it never stops the agent.

use crate::kernel::Runtime;
use reef_core::{AgentId, Event, EventMsg};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;

/// Characters of a tool output kept in a `tool.result` event.
const EVENT_OUTPUT_CHARS: usize = 2000;

/// Appends an event for `agent` and wakes the bus.
pub(crate) async fn event(rt: &Runtime, agent: &AgentId, kind: &str, data: Value) {
    if let Err(err) = rt.store().append_event(kind, Some(agent), data).await {
        rt.inner.lost_events.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%agent, kind, error = %err, "cannot record an event");
    }
    rt.bus().poke();
}

/// Records what a session reported while working on inbox messages `ids` from `senders`;
/// the end of a turn names them, so a channel or a waiting request finds the answer.
pub(super) async fn session_event(
    rt: &Runtime,
    agent: &AgentId,
    (ids, senders): (&[u64], &[String]),
    reported: Event,
) {
    rt.inner.live.publish(agent, ids, &reported);
    let msg = reported.msg;
    rt.inner.activity.observe(agent, &msg);
    rt.inner.meter.observe(agent, &msg);
    if let Some((kind, data)) = translate(ids, senders, msg) {
        event(rt, agent, kind, data).await;
    }
}

/// The daemon event for a protocol event; `None` for those not kept (streamed text, …).
fn translate(ids: &[u64], senders: &[String], msg: EventMsg) -> Option<(&'static str, Value)> {
    let inbox_id = ids.first().copied().unwrap_or(0);
    let from = senders.first();
    Some(match msg {
        EventMsg::ToolCallBegin {
            call_id,
            name,
            arguments,
        } => (
            "tool.call",
            json!({"call_id": call_id, "name": name, "arguments": arguments}),
        ),
        EventMsg::ToolCallEnd {
            call_id,
            name,
            output,
            is_error,
            saved_to,
        } => (
            "tool.result",
            json!({"call_id": call_id, "name": name, "is_error": is_error,
                   "output": output.chars().take(EVENT_OUTPUT_CHARS).collect::<String>(),
                   "saved_to": saved_to}),
        ),
        EventMsg::AssistantMessage { text } => ("agent.message", json!({"text": text})),
        EventMsg::Usage {
            provider,
            model,
            usage,
            cost_micros,
        } => (
            "model.usage",
            json!({"provider": provider, "model": model, "usage": usage,
                   "cost_micros": cost_micros}),
        ),
        EventMsg::ModelRetry { attempt, error } => {
            ("model.retry", json!({"attempt": attempt, "error": error}))
        }
        msg @ EventMsg::ContextCompacted { .. } => ("session.compacted", fields(&msg)),
        EventMsg::Steered { text, .. } => {
            ("turn.steered", json!({"inbox_id": inbox_id, "text": text}))
        }
        EventMsg::SteerReturned { text } => (
            "turn.steer_returned",
            json!({"inbox_id": inbox_id, "text": text}),
        ),
        EventMsg::ModelChanged { provider, model } => (
            "agent.model_changed",
            json!({"provider": provider, "model": model}),
        ),
        EventMsg::SessionConfigured { session_id, .. } => {
            ("session.started", json!({"session": session_id}))
        }
        EventMsg::Warning { message } => ("agent.warning", json!({"message": message})),
        EventMsg::Error { message } => ("agent.error", json!({"message": message})),
        EventMsg::TurnEnded {
            outcome,
            rounds,
            usage,
        } => (
            "turn.ended",
            json!({"inbox_id": inbox_id, "inbox_ids": ids, "from": from, "senders": senders,
                   "outcome": outcome, "rounds": rounds, "usage": usage}),
        ),
        EventMsg::TurnStarted { .. } | EventMsg::ModelDelta { .. } | EventMsg::ShutdownComplete => {
            return None;
        }
    })
}

/// A protocol event's own fields, as the protocol serializes them, without its `type` tag.
fn fields(msg: &EventMsg) -> Value {
    let mut value = serde_json::to_value(msg).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.remove("type");
    }
    value
}
