//! What MCP needs of the runtime: the configured servers and their states (reef as a
//! client), and the operator's memory tools (offered by reef as a server).

use crate::kernel::Runtime;
use std::sync::Arc;

impl Runtime {
    /// The state of every configured MCP server (empty when none is configured).
    pub fn mcp_status(&self) -> Vec<reef_mcp::ServerStatus> {
        self.inner
            .mcp
            .as_ref()
            .map(|hub| hub.status())
            .unwrap_or_default()
    }

    /// The memory tools (`memory_save`, `memory_search`, …) as the operator's own agent has
    /// them, for front doors that offer memory (the MCP server).
    pub fn operator_memory_tools(&self) -> Vec<Arc<dyn reef_core::Tool>> {
        let mut registry = reef_agent::ToolRegistry::new();
        reef_agent::add_memory_tools(
            &mut registry,
            self.inner.memory.clone(),
            reef_core::DEFAULT_AGENT,
            true,
        );
        registry
            .names()
            .iter()
            .filter_map(|name| registry.get(name))
            .collect()
    }

    /// The MCP servers of this daemon, when any is configured.
    pub fn mcp(&self) -> Option<Arc<reef_mcp::McpHub>> {
        self.inner.mcp.clone()
    }
}
