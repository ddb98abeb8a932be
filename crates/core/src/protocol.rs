//! The protocol between a front end and the turn engine: `Submission { id, op }` goes in,
//! `Event { id, msg }` comes out. Every front end (CLI, JSON lines, later the daemon and
//! channels) is a consumer of these events.

use crate::ids::{SessionId, SubmissionId, ToolCallId};
use crate::usage::Usage;
use serde::{Deserialize, Serialize};

/// A request from a front end to an agent session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    pub id: SubmissionId,
    pub op: Op,
}

/// What a submission asks for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// Run a turn with this user input.
    UserInput { text: String },
    /// Cancel the turn in progress (Ctrl-C). The session stays usable.
    Interrupt,
    /// Finish the session: no more submissions are accepted.
    Shutdown,
}

/// Something that happened in a session, tagged with the submission that caused it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: SubmissionId,
    pub msg: EventMsg,
}

/// The event payloads. Serialized with a `type` tag, so `reef run --json` prints one per line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventMsg {
    /// The session is ready (sent once, before the first turn).
    SessionConfigured {
        session_id: SessionId,
        provider: String,
        model: String,
        workspace: String,
    },
    TurnStarted {
        session_id: SessionId,
    },
    /// A piece of the model's text, as it streams in.
    ModelDelta {
        text: String,
    },
    /// The model request failed with a retryable error and is being sent again: the
    /// `model_delta` text of this round so far belonged to the failed attempt; discard it.
    ModelRetry {
        attempt: u32,
        error: String,
    },
    /// The model's complete text for one round (may be empty when it only calls tools).
    AssistantMessage {
        text: String,
    },
    ToolCallBegin {
        call_id: ToolCallId,
        name: String,
        arguments: String,
    },
    ToolCallEnd {
        call_id: ToolCallId,
        name: String,
        /// What the model was sent (a preview when the full output was saved to a file).
        output: String,
        is_error: bool,
        /// Workspace-relative path of the full output, when it was too large to inline.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        saved_to: Option<String>,
    },
    /// Usage of one model request, as reported by the provider that served it.
    Usage {
        provider: String,
        model: String,
        usage: Usage,
        /// What the request cost in millionths of a US dollar; `None` without a known price.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_micros: Option<u64>,
    },
    /// A problem that did not end the turn (a retry, a tool-call parse fallback, …).
    Warning {
        message: String,
    },
    /// A failure; the turn ends with `TurnOutcome::Failed` right after.
    Error {
        message: String,
    },
    TurnEnded {
        outcome: TurnOutcome,
        rounds: u32,
        usage: Usage,
    },
    /// The session finished after `Op::Shutdown`.
    ShutdownComplete,
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The model gave a final answer.
    Completed { text: String },
    /// The round budget ran out before a final answer.
    MaxRounds { limit: u32 },
    /// The wall-clock budget ran out.
    TimedOut { limit_secs: u64 },
    /// The token budget of the turn (what was left of the agent's) ran out.
    BudgetExceeded { limit: u64, used: u64 },
    /// The cost budget of the turn (what was left of the agent's), in millionths of a US
    /// dollar, ran out.
    CostExceeded { limit_micros: u64, used_micros: u64 },
    /// The model repeated the same tool call with the same arguments `repeats` times.
    LoopDetected { tool: String, repeats: u32 },
    /// The user interrupted the turn.
    Interrupted,
    /// The model could not be reached or kept failing.
    Failed { error: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_a_type_tag() {
        let ev = Event {
            id: SubmissionId::from("sub_1"),
            msg: EventMsg::TurnEnded {
                outcome: TurnOutcome::Completed {
                    text: "done".into(),
                },
                rounds: 2,
                usage: Usage::default(),
            },
        };
        let json = serde_json::to_value(&ev).unwrap();
        assert_eq!(json["msg"]["type"], "turn_ended");
        assert_eq!(json["msg"]["outcome"]["status"], "completed");
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, ev);
    }

    #[test]
    fn submissions_parse_from_json() {
        let s: Submission =
            serde_json::from_str(r#"{"id":"sub_9","op":{"type":"user_input","text":"hi"}}"#)
                .unwrap();
        assert_eq!(s.op, Op::UserInput { text: "hi".into() });
    }
}
