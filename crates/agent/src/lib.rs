//! reef-agent: the turn engine.
//!
//! A `Session` owns one conversation: it assembles the context, asks the model, dispatches tool
//! calls (concurrently, in the sandbox), persists every message as it happens and reports what
//! it does as protocol `Event`s. `spawn` wraps a session in the `Submission`/`Event` protocol
//! that every front end speaks.

mod archive;
mod compact;
mod debug;
mod dispatch;
mod egress;
mod error;
mod fence;
mod handle;
mod history;
mod layers;
mod meter;
mod prompt;
mod rights;
mod session;
mod setup;
mod skills;
mod small;
mod textcalls;
mod turn;

pub use archive::ARCHIVE_DIR;
pub use compact::NOTHING_TO_COMPACT;
pub use debug::{Debugger, Resume, Stop, StopAt, StopKind};
pub use error::AgentError;
pub use handle::{AgentHandle, spawn};
pub use layers::mcp_hub;
pub use prompt::NOTES_FILE;
pub use reef_sandbox::{HelperCommand, Sandbox, SandboxPolicy};
pub use reef_tools::{Secrets, ToolRegistry};
pub use rights::{Refusal, Rights, TokenSource};
pub use session::{ModelResolver, Session, SessionOptions};
pub use setup::{
    DISABLED_WARNING, add_memory_tools, builtin_registry, builtin_registry_in, builtin_tools,
    default_model, fallback_warning, memory, memory_fusion, model_client, policy_from_config,
    prices, provider_settings, sandbox_policy, session_options, skill_set,
};
pub use textcalls::parse_text_tool_calls;
