//! The tools a session gets beyond its own, laid over them again at the start of every turn:
//! its skills' tools, then its MCP servers' (`SERVER__TOOL`, `mcp_read_resource`,
//! `mcp_get_prompt`). A name already taken is left out with a warning.

use crate::session::Session;
use reef_mcp::McpAccess;

impl Session {
    /// Gives the session the MCP servers of `access`, whose tools are listed (and the
    /// servers started, the first time) at the start of each turn.
    pub fn set_mcp(&mut self, access: McpAccess) {
        self.keep_own_tools();
        self.mcp = Some(access);
    }

    /// Remembers the session's own tools, before any layer is added.
    pub(crate) fn keep_own_tools(&mut self) {
        if self.own_tools.is_none() {
            self.own_tools = Some(self.tools.clone());
        }
    }

    /// Rebuilds the tool registry: the session's own tools, its skills' and its MCP
    /// servers'.
    pub(crate) async fn refresh_tools(&mut self) {
        let Some(own) = self.own_tools.clone() else {
            return;
        };
        let mut registry = (*own).clone();
        self.load_skills(&mut registry).await;
        if let Some(access) = &self.mcp {
            for tool in access.tools().await {
                let name = tool.spec().name;
                if registry.get(&name).is_some() {
                    tracing::warn!(tool = %name, "an MCP tool has the name of a tool the agent has; it is left out");
                    continue;
                }
                registry.register(tool);
            }
        }
        self.tools = std::sync::Arc::new(registry);
    }
}

/// The MCP servers of `config`, started on first use under `policy` (`[sandbox]` as this
/// process runs it, the server's own changes applied), each in `$REEF_HOME/mcp/NAME`.
/// `None` when no server is configured.
pub fn mcp_hub(
    config: &reef_config::Config,
    policy: reef_sandbox::SandboxPolicy,
) -> Option<std::sync::Arc<reef_mcp::McpHub>> {
    if config.mcp.servers.is_empty() {
        return None;
    }
    let launcher = reef_mcp::Launcher {
        policy,
        servers_dir: config.home.join("mcp"),
        secrets: config.secrets.clone(),
        vault: Some(config.vault.clone()),
    };
    Some(std::sync::Arc::new(reef_mcp::McpHub::new(
        &config.mcp,
        launcher,
    )))
}
