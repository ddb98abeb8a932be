//! reef-tools: the tool registry and reef's built-in tools (shell, files, search, HTTP fetch,
//! memory and session search).
//!
//! Tool names and argument shapes are a public contract with models; see README.md.

mod args;
mod builtin;
mod files;
mod guarded;
mod registry;
mod secrets;
mod text;

pub use args::parse_args;
pub use builtin::{BuiltinConfig, MemoryScope, builtin_registry, format_streams, memory_tools};
pub use guarded::{GuardedHttp, HttpReply};
pub use registry::ToolRegistry;
pub use secrets::{MIN_SECRET_LEN, Secrets};
pub use text::{looks_binary, truncate_middle};
