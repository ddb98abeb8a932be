//! Builds the parts of a session from resolved configuration.

use crate::error::AgentError;
use crate::session::SessionOptions;
use reef_config::{Config, ProviderConfig};
use reef_core::ModelClient;
use reef_llm::ProviderSettings;
use reef_sandbox::{Sandbox, SandboxPolicy};
use reef_tools::{BuiltinConfig, ToolRegistry};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A model client for a configured provider.
pub fn model_client(provider: &ProviderConfig) -> Result<Arc<dyn ModelClient>, AgentError> {
    reef_llm::build_client(provider_settings(provider))
        .map_err(|e| AgentError::Setup(e.to_string()))
}

/// The model-client settings for a configured provider (the key is exposed here, at the edge).
pub fn provider_settings(provider: &ProviderConfig) -> ProviderSettings {
    ProviderSettings {
        name: provider.name.clone(),
        wire_api: provider.wire_api,
        base_url: provider.base_url.clone(),
        model: provider.model.clone(),
        api_key: provider.api_key.as_ref().map(|k| k.expose().to_owned()),
        stream: provider.stream,
        max_retries: provider.max_retries,
        retry_base: Duration::from_millis(provider.retry_base_ms),
        request_timeout: Duration::from_secs(provider.request_timeout_secs),
        max_output_tokens: provider.max_output_tokens,
    }
}

/// The built-in tools, running their processes through a sandbox with the default policy.
pub fn builtin_tools(config: &Config) -> Arc<ToolRegistry> {
    let sandbox = Arc::new(Sandbox::new(SandboxPolicy::default()));
    let tools = BuiltinConfig {
        shell_timeout_secs: config.tools.shell_timeout_secs,
        max_shell_output_chars: config.tools.max_shell_output_chars,
        http_allow_private: config.tools.http_allow_private,
        http_timeout_secs: config.tools.http_timeout_secs,
        ..BuiltinConfig::default()
    };
    Arc::new(reef_tools::builtin_registry(sandbox, tools))
}

/// Session options from `[agent]`, working in `workspace`.
pub fn session_options(config: &Config, workspace: PathBuf) -> SessionOptions {
    SessionOptions {
        workspace,
        max_rounds: config.agent.max_rounds,
        max_wall: Duration::from_secs(config.agent.max_wall_secs),
        inline_output_chars: config.agent.inline_output_chars,
        system_prompt: config.agent.system_prompt.clone(),
    }
}
