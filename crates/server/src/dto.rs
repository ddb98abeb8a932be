//! The API's request and response bodies. They derive `JsonSchema`, which is how the OpenAPI
//! document describes them; store records are converted here so the wire shape is stable.

use reef_core::EventMsg;
use reef_store::{AgentRecord, InboxMessage, PendingItem, RoomRecord, StoredEvent, StoredMessage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnBody {
    /// a-z 0-9 - _, unique.
    pub name: String,
    /// A template name (`GET /v1/templates`).
    pub template: String,
    /// A configured provider; default: the template's, then the default provider.
    pub model: Option<String>,
    /// Replaces the template's persona.
    pub persona: Option<String>,
    /// A first message for the agent.
    pub task: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AgentView {
    pub id: String,
    pub name: String,
    pub template: String,
    pub persona: String,
    /// Provider name; null = the default provider.
    pub model: Option<String>,
    pub workspace: String,
    /// pending, running, paused, completed, failed or terminated.
    pub state: String,
    pub parent: Option<String>,
    pub session: Option<String>,
    pub tools: Vec<String>,
    pub can_spawn: bool,
    pub budget: BudgetView,
    pub created_at: String,
    pub updated_at: String,
    /// What was narrowed to fit inside the parent (spawn only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clamped: Vec<String>,
    /// What confines its commands (one agent only): backend, network and `allow_domains`
    /// (its template's, narrowed to its capabilities' domains), `writable` paths besides the
    /// workspace, `warm` (commands forked from one sandbox per session), and `limits` (null:
    /// none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<std::collections::BTreeMap<String, serde_json::Value>>")]
    pub sandbox: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct BudgetView {
    pub tokens: Option<u64>,
    pub cost_micros: Option<u64>,
    pub rounds: Option<u32>,
    pub wall_secs: Option<u64>,
}

impl From<AgentRecord> for AgentView {
    fn from(a: AgentRecord) -> AgentView {
        AgentView {
            id: a.id.to_string(),
            name: a.name,
            template: a.template,
            persona: a.persona,
            model: a.model,
            workspace: a.workspace,
            state: a.state.to_string(),
            parent: a.parent.map(|p| p.to_string()),
            session: a.session.map(|s| s.to_string()),
            tools: a.capabilities.tools,
            can_spawn: a.capabilities.spawn,
            budget: BudgetView {
                tokens: a.budget.tokens,
                cost_micros: a.budget.cost_micros,
                rounds: a.budget.rounds,
                wall_secs: a.budget.wall_secs,
            },
            created_at: a.created_at,
            updated_at: a.updated_at,
            clamped: Vec::new(),
            sandbox: None,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelBody {
    /// A configured provider name.
    pub model: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PersonaBody {
    pub persona: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageBody {
    pub text: String,
    /// Make it a request: the agent's final answer is recorded as the reply.
    #[serde(default)]
    pub expect_reply: bool,
    /// How long the reply may take (default `daemon.request_timeout_secs`).
    pub timeout_secs: Option<u64>,
    /// Idempotency key: sending the same key again delivers nothing new.
    pub key: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SentView {
    pub inbox_id: Option<u64>,
    pub duplicate: bool,
    /// For a request: poll `GET /v1/questions/{id}` or watch `request.answered` events.
    pub request_id: Option<String>,
}

/// What `POST /v1/agents/{name}/compact` replaced.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CompactionView {
    pub agent: String,
    /// summarize, truncate or archive.
    pub strategy: String,
    /// manual (asked for), threshold or context_length_error.
    pub trigger: String,
    /// The stored messages `from_seq..=to_seq` are replaced in the context (the transcript
    /// keeps them).
    pub from_seq: u64,
    pub to_seq: u64,
    /// Estimated context size before and after, in tokens.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// The model's context window, in tokens.
    pub window: u64,
    /// What replaced them; null when they were dropped (truncate).
    pub summary: Option<String>,
}

impl CompactionView {
    /// The view of a `ContextCompacted` event; `None` for any other.
    pub fn from_event(agent: &str, msg: EventMsg) -> Option<CompactionView> {
        let EventMsg::ContextCompacted {
            strategy,
            trigger,
            from_seq,
            to_seq,
            tokens_before,
            tokens_after,
            window,
            summary,
        } = msg
        else {
            return None;
        };
        Some(CompactionView {
            agent: agent.to_owned(),
            strategy: strategy.as_str().to_owned(),
            trigger: serde_json::to_value(trigger)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            from_seq,
            to_seq,
            tokens_before,
            tokens_after,
            window,
            summary,
        })
    }
}

/// What `POST /v1/agents/{name}/reset` started.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ResetView {
    pub agent: String,
    /// The new session's id; the agent's next message starts its transcript.
    pub session: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct InboxView {
    pub id: u64,
    pub sender: String,
    pub body: String,
    /// pending, processing or done.
    pub status: String,
    pub attempts: u32,
    pub request_id: Option<String>,
    pub created_at: String,
}

impl From<InboxMessage> for InboxView {
    fn from(m: InboxMessage) -> InboxView {
        let status = serde_json::to_value(m.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        InboxView {
            id: m.id,
            sender: m.sender,
            body: m.body,
            status,
            attempts: m.attempts,
            request_id: m.request_id,
            created_at: m.created_at,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoomBody {
    /// `#name`.
    pub name: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinBody {
    pub agent: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostBody {
    pub text: String,
    pub key: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PostedView {
    pub room: String,
    pub recipients: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RoomView {
    pub name: String,
    pub members: Vec<String>,
    pub created_at: String,
}

impl From<RoomRecord> for RoomView {
    fn from(r: RoomRecord) -> RoomView {
        RoomView {
            name: r.name,
            members: r.members,
            created_at: r.created_at,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PendingView {
    pub id: String,
    /// question, approval, request or breakpoint.
    pub kind: String,
    /// The waiting agent's id; null = the operator.
    pub agent_id: Option<String>,
    pub target_id: Option<String>,
    /// question/options, command/pattern, the request text, or the agent and its stop.
    pub payload: serde_json::Value,
    /// pending, answered, cancelled or expired.
    pub status: String,
    pub answer: Option<String>,
    /// Unix seconds.
    pub expires_at: Option<i64>,
    pub created_at: String,
    pub resolved_at: Option<String>,
}

impl From<PendingItem> for PendingView {
    fn from(p: PendingItem) -> PendingView {
        PendingView {
            id: p.id,
            kind: p.kind.as_str().to_owned(),
            agent_id: p.agent_id.map(|a| a.to_string()),
            target_id: p.target_id.map(|a| a.to_string()),
            payload: p.payload,
            status: p.status.as_str().to_owned(),
            answer: p.answer,
            expires_at: p.expires_at,
            created_at: p.created_at,
            resolved_at: p.resolved_at,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerBody {
    /// Free text, or one of the offered options (or its 1-based number).
    pub text: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyBody {
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct EventView {
    pub seq: u64,
    pub kind: String,
    pub agent_id: Option<String>,
    pub data: serde_json::Value,
    pub created_at: String,
}

impl From<StoredEvent> for EventView {
    fn from(e: StoredEvent) -> EventView {
        EventView {
            seq: e.seq,
            kind: e.kind,
            agent_id: e.agent_id.map(|a| a.to_string()),
            data: e.data,
            created_at: e.created_at,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TranscriptEntry {
    pub seq: u64,
    pub created_at: String,
    /// A message: `role` plus content, tool calls or tool result.
    pub message: serde_json::Value,
}

impl From<StoredMessage> for TranscriptEntry {
    fn from(m: StoredMessage) -> TranscriptEntry {
        TranscriptEntry {
            seq: m.seq,
            created_at: m.created_at,
            message: serde_json::to_value(m.message).unwrap_or_default(),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionView {
    pub id: String,
    pub title: Option<String>,
    pub provider: String,
    pub model: String,
    pub created_at: String,
    pub updated_at: String,
    pub message_count: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TemplateView {
    pub name: String,
    pub description: String,
    pub model: Option<String>,
    pub tools: Vec<String>,
    pub can_spawn: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct HealthView {
    pub status: String,
    pub version: String,
    pub agents: usize,
    /// Set when tools run without the kernel sandbox.
    pub sandbox_warning: Option<String>,
    /// Events that could not be written to the history since the daemon started (each was
    /// logged); not 0 means the store is failing.
    pub lost_events: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DashboardLinkView {
    /// Opens a signed-in dashboard session once.
    pub url: String,
    pub expires_in_secs: u64,
}
