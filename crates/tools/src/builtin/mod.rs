//! The built-in tools and the registry that holds them all.

mod edit_file;
mod http_fetch;
mod list_dir;
mod memory;
pub(crate) mod net;
mod read_file;
mod search_files;
mod shell;
mod write_file;

pub use memory::{MemoryScope, memory_tools};
pub use shell::format_streams;

use crate::files::Files;
use crate::registry::ToolRegistry;
use crate::secrets::Secrets;
use reef_core::SecretSpec;
use reef_sandbox::Sandbox;
use std::sync::Arc;

/// Limits and switches for the built-in tools.
#[derive(Clone, Debug)]
pub struct BuiltinConfig {
    /// Default `shell` timeout when the call gives none.
    pub shell_timeout_secs: u64,
    /// `shell` output (stdout + stderr) above this many characters keeps only head and tail.
    pub max_shell_output_chars: usize,
    /// Let `http_fetch` reach loopback / private / link-local addresses.
    pub http_allow_private: bool,
    /// Whole-request limit for `http_fetch`, redirects included.
    pub http_timeout_secs: u64,
    /// `http_fetch` response bodies are cut after this many bytes.
    pub http_max_bytes: usize,
    /// `read_file` and `edit_file` refuse files larger than this.
    pub max_read_bytes: usize,
    /// Secrets `shell` calls may ask for by name.
    pub secrets: Vec<SecretSpec>,
    /// Where vault secrets are read.
    pub vault: Option<Arc<reef_config::Vault>>,
    /// What the leak detector does with credentials in calls that send data out.
    pub leaks: reef_security::leak::LeakPolicy,
}

impl Default for BuiltinConfig {
    fn default() -> Self {
        Self {
            shell_timeout_secs: 30,
            max_shell_output_chars: 10_000,
            http_allow_private: false,
            http_timeout_secs: 30,
            http_max_bytes: 2 * 1024 * 1024,
            max_read_bytes: 1024 * 1024,
            secrets: Vec::new(),
            vault: None,
            leaks: reef_security::leak::LeakPolicy::default(),
        }
    }
}

/// A registry holding every built-in tool: `shell`, `read_file`, `write_file`, `edit_file`,
/// `list_dir`, `search_files` and `http_fetch`. The file tools open paths through
/// reef-workspace and refuse the paths `sandbox`'s policy hides.
pub fn builtin_registry(sandbox: Arc<Sandbox>, config: BuiltinConfig) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    let mut secrets = Secrets::new(config.secrets.clone()).with_leak_policy(config.leaks.clone());
    if let Some(vault) = &config.vault {
        secrets = secrets.with_vault(vault.clone());
    }
    let secrets = Arc::new(secrets);
    registry.set_secrets(secrets.clone());
    // The file tools refuse what the sandbox hides from commands.
    let files = Files::new(sandbox.policy().hidden_paths());
    registry.register(Arc::new(shell::ShellTool::new(
        sandbox,
        &config,
        secrets,
        files.clone(),
    )));
    registry.register(Arc::new(read_file::ReadFileTool::new(
        &config,
        files.clone(),
    )));
    registry.register(Arc::new(write_file::WriteFileTool::new(files.clone())));
    registry.register(Arc::new(edit_file::EditFileTool::new(
        &config,
        files.clone(),
    )));
    registry.register(Arc::new(list_dir::ListDirTool::new(files.clone())));
    registry.register(Arc::new(search_files::SearchFilesTool::new(files)));
    registry.register(Arc::new(http_fetch::HttpFetchTool::new(&config)));
    registry
}
