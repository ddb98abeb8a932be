//! reef as an MCP server: what it offers is an [`McpHost`] (the daemon's runtime, or a
//! daemon reached over HTTP by `reef mcp serve`), served on stdio or as streamable HTTP.

mod bridge;
mod sdk;

use crate::types::{CallResult, ResourceContents, ResourceInfo, ToolInfo};
use async_trait::async_trait;
use serde_json::{Map, Value};

pub use bridge::RemoteHost;
pub use sdk::{HttpGuard, http_router, serve_stdio};

/// What changed in what a host offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Tools,
    Resources,
}

/// Why a host refused a request (a tool's own failure is a [`CallResult`] with `is_error`).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// No tool or resource of that name: the client should list them again.
    #[error("{0}")]
    NotFound(String),
    /// The arguments do not fit: the client should fix its request.
    #[error("{0}")]
    Invalid(String),
    /// The host failed; the request may be retried.
    #[error("{0}")]
    Failed(String),
}

/// What reef offers to MCP hosts. Implemented where the calls are answered, so that the MCP
/// server goes through the same checks as every other front door.
#[async_trait]
pub trait McpHost: Send + Sync + 'static {
    async fn tools(&self) -> Result<Vec<ToolInfo>, HostError>;
    async fn call(&self, name: &str, args: Map<String, Value>) -> Result<CallResult, HostError>;
    async fn resources(&self) -> Result<Vec<ResourceInfo>, HostError>;
    async fn read(&self, uri: &str) -> Result<Vec<ResourceContents>, HostError>;
    /// Changes to announce to connected clients (`notifications/*/list_changed`).
    fn changes(&self) -> tokio::sync::broadcast::Receiver<Change>;
}
