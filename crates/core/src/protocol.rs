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
    /// A message for the turn in progress: the model sees it as a user message at the next
    /// round boundary (before its next request). With no turn running, or when the turn ends
    /// before another round, it comes back as `SteerReturned` for the front end to send as
    /// the next input or drop.
    Steer { text: String },
    /// Compact the history now, with the configured strategy (`/compact`).
    Compact,
    /// Start a fresh session in the same workspace (`/new`): a new transcript; notes and
    /// long-term memory are kept. Answered by `SessionConfigured`.
    NewSession,
    /// Use the configured provider `provider` (`None`: the default model) from the next
    /// request on. Answered by `ModelChanged`, or an `Error` naming what is wrong.
    SetModel { provider: Option<String> },
    /// Replace the per-turn settings for the following turns (a daemon agent's persona and
    /// what is left of its budgets).
    Configure { settings: TurnSettings },
    /// Cancel the turn in progress (Ctrl-C). The session stays usable.
    Interrupt,
    /// Finish the session: no more submissions are accepted.
    Shutdown,
}

/// Settings a front end may change between turns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnSettings {
    /// Who the agent is, put before the system prompt.
    pub persona: Option<String>,
    /// Model requests per turn.
    pub max_rounds: u32,
    /// Wall-clock budget of one turn, in seconds.
    pub max_wall_secs: u64,
    /// Tokens the turn may use; `None` is unlimited.
    pub token_budget: Option<u64>,
    /// Millionths of a US dollar the turn may spend; `None` is unlimited.
    pub cost_budget_micros: Option<u64>,
}

/// How a session shrinks its history when the context fills up (`agent.compaction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStrategy {
    /// The model summarizes the middle of the conversation; the first user message and the
    /// recent turns stay verbatim.
    Summarize,
    /// The oldest turns after the first user message are dropped from the context.
    Truncate,
    /// Like `Summarize`, and the replaced messages are written to the workspace's
    /// `memory/YYYY-MM-DD.md` and to long-term memory.
    Archive,
}

impl CompactionStrategy {
    pub const ALL: [CompactionStrategy; 3] = [
        CompactionStrategy::Summarize,
        CompactionStrategy::Truncate,
        CompactionStrategy::Archive,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CompactionStrategy::Summarize => "summarize",
            CompactionStrategy::Truncate => "truncate",
            CompactionStrategy::Archive => "archive",
        }
    }

    pub fn parse(s: &str) -> Option<CompactionStrategy> {
        CompactionStrategy::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
    }
}

/// How the turn engine drives the model (`agent.profile`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentProfile {
    /// `small` for a model run in-process (`wire_api = "local"`), else `standard`.
    #[default]
    Auto,
    /// The full prompt and tool set.
    Standard,
    /// Built for 1–3B models: a compact prompt with worked examples, fewer tools described
    /// for them, and checks that send an unsupported answer back once.
    Small,
}

impl AgentProfile {
    pub const ALL: [AgentProfile; 3] = [
        AgentProfile::Auto,
        AgentProfile::Standard,
        AgentProfile::Small,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AgentProfile::Auto => "auto",
            AgentProfile::Standard => "standard",
            AgentProfile::Small => "small",
        }
    }

    pub fn parse(s: &str) -> Option<AgentProfile> {
        AgentProfile::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// Why a compaction ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTrigger {
    /// The next request would have passed `agent.compact_at` of the window.
    Threshold,
    /// The provider answered that the context is too long.
    ContextLengthError,
    /// Asked for (`/compact`, `reef agent compact`).
    Manual,
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
    /// The history was compacted: stored messages `from_seq..=to_seq` are replaced in the
    /// context (the transcript keeps them all).
    ContextCompacted {
        strategy: CompactionStrategy,
        trigger: CompactionTrigger,
        from_seq: u64,
        to_seq: u64,
        /// Estimated context size before and after, in tokens.
        tokens_before: u64,
        tokens_after: u64,
        /// The window the sizes are measured against.
        window: u64,
        /// The summary that replaced them (`None` for `truncate`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// A steering message (`Op::Steer`) was added to the running turn as a user message.
    Steered {
        /// The submission that carried it.
        steer_id: SubmissionId,
        text: String,
    },
    /// An `Op::Steer` (this event carries its submission id) found no round boundary to
    /// join: no turn was running, or the turn ended first. Nothing was stored.
    SteerReturned {
        text: String,
    },
    /// `Op::SetModel` took effect.
    ModelChanged {
        provider: String,
        model: String,
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
    /// The context did not fit the model's window even after compaction (a single message
    /// too large for it): the turn's messages are left out of later requests, so the
    /// session goes on with the next message.
    ContextOverflow { tokens: u64, window: u64 },
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
