//! reef-runtime: the kernel of reef's daemon. `Runtime` supervises many durable agents: each
//! has an inbox in the store and a worker that wakes when a message arrives and runs turns
//! (at most `daemon.max_concurrent_turns` at once) until the inbox is empty, with budgets,
//! loop detection, messaging and rooms, operator questions and approvals, and a bus that
//! publishes the committed event history to subscribers, the scheduler that fires routines
//! exactly once, the operator command set, and the board where running channels report their
//! state.

mod activity;
mod agents;
mod audit;
mod backfill;
mod bus;
pub mod caps;
mod channels;
mod cluster;
mod debug;
mod error;
mod expiry;
mod gate;
mod incoming;
mod jobs;
mod kernel;
mod live;
mod mcp;
mod messaging;
mod metrics;
pub mod operator;
mod outgoing;
mod questions;
mod reconcile;
mod routine_tools;
mod routines;
mod scheduler;
mod templates;
mod terminal;
mod tools;
mod uploads;
mod worker;
mod workers;

pub use activity::{Activity, Change as ActivityChange, Doing};
pub use agents::{ROOM_AGENTS, ROOM_CONTROL, SpawnRequest, Spawned, check_name};
pub use bus::{Bus, EventFilter};
pub use channels::{ChannelHook, ChannelState, ChannelStatus, HookKind};
pub use debug::{Breakpoint, DebugCommand, DebugStatus, MAX_DEBUG_WAIT, PausedView};
pub use error::RuntimeError;
pub use kernel::{Recovery, Runtime, RuntimeOptions};
pub use live::LiveEvent;
pub use messaging::{MAX_MESSAGE_BYTES, Sender, Sent};
pub use metrics::{Counts, ModelCounts, TOOL_SECONDS_BUCKETS, ToolCounts};
pub use outgoing::Outgoing;
pub use questions::MAX_TTL_SECS;
/// How `RuntimeOptions::helper` names the sandbox helper process.
pub use reef_agent::HelperCommand;
/// A terminal's size, for [`Runtime::open_terminal`].
pub use reef_sandbox::TermSize;
pub use routines::{RoutineRequest, RoutineView};
pub use templates::{
    BUILTIN_TEMPLATES, DEFAULT_SCHEDULE_TASK, SandboxOverrides, Template, TemplateError,
    TemplateSchedule, TemplateSource, Templates,
};
pub use terminal::{SHOWN_KEPT, TYPED_KEPT, TerminalSession};
