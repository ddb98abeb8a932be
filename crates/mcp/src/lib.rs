//! reef-mcp: reef as a client of MCP servers, and as a server. Configured servers
//! (`[mcp.servers.NAME]`) are started on first use, a program inside reef's sandbox or a URL
//! over streamable HTTP, and their tools, resources and prompts become tools of the agents
//! that have them. What reef offers to MCP hosts is an [`McpHost`], served on stdio or at
//! `/mcp`. The SDK (rmcp) stays behind reef's own types, in two files.

mod client;
mod error;
mod hub;
mod launch;
mod names;
mod render;
mod serve;
mod tools;
mod types;
mod wire;

pub use client::{Connection, Signals};
pub use error::McpError;
pub use hub::{McpHub, ServerStatus};
pub use launch::Launcher;
pub use names::{MAX_SCHEMA_BYTES, MAX_TOOL_NAME, Offered, ToolList, offer, public_name};
pub use render::{
    MEDIA_DIR, call_result as render_call, prompt as render_prompt, prompt_list,
    resource as render_resource, resource_list,
};
pub use serve::{Change, HostError, HttpGuard, McpHost, RemoteHost, http_router, serve_stdio};
pub use tools::McpAccess;
pub use types::{
    CallResult, Content, PromptArgument, PromptInfo, PromptMessages, ResourceContents,
    ResourceInfo, ToolInfo,
};
