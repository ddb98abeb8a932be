//! The raw shape of `reef.toml`: every field optional, unknown keys rejected.

use crate::sandbox::{AcceleratorName, ByteSize, NetworkModeName, SandboxBackendName};
use reef_core::WireApi;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigToml {
    pub model: Option<ModelToml>,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderToml>,
    pub agent: Option<AgentToml>,
    pub tools: Option<ToolsToml>,
    pub store: Option<StoreToml>,
    pub sandbox: Option<SandboxToml>,
    pub daemon: Option<crate::daemon::DaemonToml>,
    #[serde(default)]
    pub prices: BTreeMap<String, PriceToml>,
    pub approvals: Option<crate::daemon::ApprovalsToml>,
    pub metrics: Option<crate::daemon::MetricsToml>,
    pub dashboard: Option<crate::daemon::DashboardToml>,
    pub gateway: Option<crate::gateway::GatewayToml>,
    pub models: Option<ModelsToml>,
    pub memory: Option<crate::memory::MemoryToml>,
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretToml>,
    pub vault: Option<VaultToml>,
    pub safety: Option<crate::safety::SafetyToml>,
    #[serde(default)]
    pub channels: BTreeMap<String, crate::channels::ChannelToml>,
    /// `[operators] CHANNEL = ["nick!user@host", …]` (IRC masks) or `[123456789, …]` (a bot
    /// platform's user ids).
    #[serde(default)]
    pub operators: BTreeMap<String, Vec<crate::channels::OperatorToml>>,
    pub hooks: Option<crate::hooks::HooksToml>,
    pub scheduler: Option<crate::routines::SchedulerToml>,
    pub heartbeat: Option<crate::heartbeat::HeartbeatToml>,
    pub jobs: Option<crate::heartbeat::JobsToml>,
    pub cluster: Option<crate::cluster::ClusterToml>,
    pub skills: Option<crate::skills::SkillsToml>,
    pub mcp: Option<crate::mcp::McpToml>,
    #[serde(default)]
    pub routines: BTreeMap<String, crate::routines::RoutineFields>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SecretToml {
    pub env: Option<String>,
    pub file: Option<String>,
    pub description: Option<String>,
    /// `always` (default), `with-approval` or `only-for`.
    pub policy: Option<String>,
    /// `tool:NAME`, `skill:NAME`, `domain:HOST`: who an `only-for` secret may be given to.
    pub only_for: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct VaultToml {
    /// A file whose content is the vault's passphrase.
    pub key_file: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModelToml {
    pub default: Option<ModelDefault>,
    pub cooldown_secs: Option<u64>,
}

/// `default = "main"` or a failover chain `default = ["main", "backup"]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum ModelDefault {
    One(String),
    Chain(Vec<String>),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PriceToml {
    pub input: Option<f64>,
    pub output: Option<f64>,
    pub cached_input: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProviderToml {
    pub wire_api: Option<WireApi>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub stream: Option<bool>,
    pub max_retries: Option<u32>,
    pub retry_base_ms: Option<u64>,
    pub request_timeout_secs: Option<u64>,
    pub max_output_tokens: Option<u32>,
    /// `wire_api = "local"`: a GGUF file (default: the models directory's `MODEL.gguf`).
    pub model_path: Option<String>,
    /// `wire_api = "local"`: inference threads (default: the idle cores).
    pub threads: Option<u32>,
    /// The context window in tokens (default: by wire API and model, see
    /// `windows::default_context_tokens`).
    pub context_tokens: Option<u32>,
    /// Sampling, checked in `sampling::resolve`.
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<u32>,
    pub repeat_penalty: Option<f32>,
    pub seed: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModelsToml {
    pub dir: Option<String>,
    pub index_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentToml {
    pub max_rounds: Option<u32>,
    pub max_wall_secs: Option<u64>,
    pub inline_output_chars: Option<usize>,
    pub loop_limit: Option<u32>,
    pub system_prompt: Option<String>,
    pub compact_at: Option<f64>,
    /// A `reef_core::CompactionStrategy` name, parsed in `agent::resolve`.
    pub compaction: Option<String>,
    pub keep_recent_turns: Option<u32>,
    /// A `reef_core::AgentProfile` name, parsed in `agent::resolve`.
    pub profile: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolsToml {
    pub shell_timeout_secs: Option<u64>,
    pub max_shell_output_chars: Option<usize>,
    pub http_allow_private: Option<bool>,
    pub http_timeout_secs: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoreToml {
    pub path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SandboxToml {
    pub backend: Option<SandboxBackendName>,
    pub required: Option<bool>,
    pub network: Option<NetworkModeName>,
    pub allow_domains: Option<Vec<String>>,
    pub writable: Option<Vec<String>>,
    pub memory: Option<ByteSize>,
    pub file_size: Option<ByteSize>,
    pub cpu_secs: Option<u64>,
    pub max_processes: Option<u64>,
    pub open_files: Option<u64>,
    pub warm: Option<bool>,
    pub microvm: Option<MicrovmToml>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MicrovmToml {
    pub qemu: Option<String>,
    pub image: Option<String>,
    pub memory: Option<ByteSize>,
    pub cpus: Option<u32>,
    pub pool: Option<usize>,
    pub snapshot: Option<bool>,
    pub accelerator: Option<AcceleratorName>,
}

/// Deserializes a TOML table, naming the exact key path on failure.
pub(crate) fn parse_table(table: &toml::Table) -> Result<ConfigToml, (String, String)> {
    let value = toml::Value::Table(table.clone());
    serde_path_to_error::deserialize::<_, ConfigToml>(value).map_err(|err| {
        let key = err.path().to_string();
        (key, err.into_inner().to_string())
    })
}
