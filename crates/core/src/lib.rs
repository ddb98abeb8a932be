//! reef-core: the vocabulary every other reef crate speaks.
//!
//! No I/O and no async runtime live here: only data types, the protocol
//! between front ends and the turn engine, and the open traits (`ModelClient`,
//! `Embedder`, `Tool`, `Channel`) that other crates implement.

pub mod agent;
pub mod capability;
pub mod channel;
pub mod embed;
pub mod ids;
pub mod message;
pub mod model;
pub mod protocol;
pub mod routine;
pub mod secret;
pub mod tool;
pub mod usage;

pub use agent::{AGENT_STATES, AgentState, Budget, DEFAULT_AGENT, InvalidTransition, QueueMode};
pub use capability::{
    ANY, Capabilities, Need, PatternList, RIGHT_FORMS, name_pattern, normalize_path,
    pattern_covers, pattern_matches, pattern_regex,
};
pub use channel::{
    Author, Channel, ChannelError, ChannelHealth, Conversation, Inbound, Outbound, Speaker, Upload,
};
pub use embed::{Embedder, normalize};
pub use ids::{AgentId, SessionId, SubmissionId, ToolCallId};
pub use message::{Message, Role};
pub use model::{
    ModelClient, ModelError, ModelErrorKind, ModelRequest, ModelResponse, OnDelta, OnStream,
    Sampling, StopReason, StreamEvent, ToolChoice, WireApi,
};
pub use protocol::{
    AgentProfile, CompactionStrategy, CompactionTrigger, Event, EventMsg, Op, Submission,
    TurnOutcome, TurnSettings,
};
pub use routine::{Action, CatchUp, Concurrency, Guardrails, HEARTBEAT_OK, RoutineSpec, Trigger};
pub use secret::{
    SecretFingerprint, SecretPolicy, SecretScope, SecretSource, SecretSpec, SecretUse,
    domain_matches,
};
pub use tool::{
    ContentSource, Egress, Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolSpec,
};
pub use usage::Usage;
