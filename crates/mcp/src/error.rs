//! What can go wrong talking to an MCP server, each variant saying what to do about it.

/// Why a request to an MCP server failed.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// No server of that name is configured (or it is not offered to this agent): check
    /// `[mcp.servers]` and `reef mcp list`.
    #[error("no MCP server `{0}` is configured for this agent")]
    UnknownServer(String),
    /// The server is configured with `enabled = false`.
    #[error("MCP server `{0}` is disabled (enabled = false)")]
    Disabled(String),
    /// The server's program could not be started or its URL reached: fix its configuration
    /// (`reef mcp list` shows the last error). reef tries again after a delay.
    #[error("MCP server `{server}` could not start: {reason}")]
    Start { server: String, reason: String },
    /// The server did not complete the MCP handshake.
    #[error("MCP server `{server}` did not complete the handshake: {reason}")]
    Handshake { server: String, reason: String },
    /// The server failed recently and is waiting before it is started again.
    #[error(
        "MCP server `{server}` is not running ({reason}); it is started again when used after {retry_in_secs} s"
    )]
    Backoff {
        server: String,
        reason: String,
        retry_in_secs: u64,
    },
    /// The request took longer than the server's `timeout_secs`; it was cancelled.
    #[error("MCP server `{server}` did not answer within {secs} s (the request was cancelled)")]
    Timeout { server: String, secs: u64 },
    /// The connection closed (the server exited or crashed) before the answer came; the next
    /// request starts it again.
    #[error("MCP server `{server}` closed the connection: {reason}")]
    Closed { server: String, reason: String },
    /// The server answered with a JSON-RPC error: the request itself was refused.
    #[error("MCP server `{server}` refused the request: {message} (code {code})")]
    Refused {
        server: String,
        code: i32,
        message: String,
    },
    /// The server answered something reef cannot read.
    #[error("MCP server `{server}` answered unexpectedly: {reason}")]
    Protocol { server: String, reason: String },
    /// The request was interrupted on reef's side (the turn was interrupted).
    #[error("the request to MCP server `{0}` was cancelled")]
    Cancelled(String),
}

impl McpError {
    /// Whether the connection is unusable after this error (the server is to be restarted).
    pub fn is_fatal_to_connection(&self) -> bool {
        matches!(self, McpError::Closed { .. } | McpError::Handshake { .. })
    }
}
