//! reef-mcp: reef as a client of MCP servers. Configured servers (`[mcp.servers.NAME]`) are
//! started on first use, a program inside reef's sandbox or a URL over streamable HTTP, and
//! their tools, resources and prompts become tools of the agents that have them. The SDK
//! (rmcp) is used behind reef's own [`Connection`] trait, in one file.

mod client;
mod error;
mod hub;
mod launch;
mod names;
mod render;
mod tools;
mod types;
mod wire;

pub use client::{Connection, Signals};
pub use error::McpError;
pub use hub::{McpHub, ServerStatus, ToolList};
pub use launch::Launcher;
pub use names::{MAX_SCHEMA_BYTES, MAX_TOOL_NAME, Offered, offer, public_name};
pub use render::MEDIA_DIR;
pub use tools::McpAccess;
pub use types::{
    CallResult, Content, PromptArgument, PromptInfo, PromptMessages, ResourceContents,
    ResourceInfo, ToolInfo,
};
