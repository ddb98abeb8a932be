//! The host `reef mcp serve` offers on stdio: a daemon's `/mcp`, reached over HTTP with the
//! daemon's token, so every call goes through the daemon's own checks.

use super::{Change, HostError, McpHost};
use crate::client::{Connection, Signals, connect_http};
use crate::error::McpError;
use crate::types::{CallResult, ResourceContents, ResourceInfo, ToolInfo};
use async_trait::async_trait;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// The most tools forwarded from the daemon (it offers a handful).
const MAX_FORWARDED_TOOLS: usize = 1000;

/// A daemon's MCP endpoint, forwarded.
pub struct RemoteHost {
    conn: Arc<dyn Connection>,
    signals: Arc<Signals>,
}

impl RemoteHost {
    /// Connects to `url` (a daemon's `/mcp`) with its bearer `token`.
    pub async fn connect(url: &str, token: &str, timeout: Duration) -> Result<Self, McpError> {
        let signals = Arc::new(Signals::default());
        let conn = connect_http(
            "reef",
            url,
            Vec::new(),
            Some(token.to_owned()),
            signals.clone(),
            timeout,
        )
        .await?;
        Ok(Self { conn, signals })
    }
}

fn forward(err: McpError) -> HostError {
    match err {
        McpError::Refused {
            code: -32602,
            message,
            ..
        } => HostError::Invalid(message),
        McpError::Refused {
            code: -32002,
            message,
            ..
        } => HostError::NotFound(message),
        other => HostError::Failed(other.to_string()),
    }
}

#[async_trait]
impl McpHost for RemoteHost {
    async fn tools(&self) -> Result<Vec<ToolInfo>, HostError> {
        self.conn
            .list_tools(MAX_FORWARDED_TOOLS)
            .await
            .map(|(tools, _, _)| tools)
            .map_err(forward)
    }

    async fn call(&self, name: &str, args: Map<String, Value>) -> Result<CallResult, HostError> {
        self.conn.call_tool(name, args).await.map_err(forward)
    }

    async fn resources(&self) -> Result<Vec<ResourceInfo>, HostError> {
        self.conn.list_resources().await.map_err(forward)
    }

    async fn read(&self, uri: &str) -> Result<Vec<ResourceContents>, HostError> {
        self.conn.read_resource(uri).await.map_err(forward)
    }

    fn changes(&self) -> tokio::sync::broadcast::Receiver<Change> {
        self.signals.changes()
    }
}
