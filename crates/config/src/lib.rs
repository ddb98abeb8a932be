//! reef-config: reads the layered TOML configuration and resolves it into a typed `Config`.
//!
//! Precedence, lowest first: built-in defaults < `$REEF_HOME/reef.toml` < `./reef.toml` in the
//! project directory < `REEF_*` environment variables < `-c key=value` on the command line.
//! Every resolved value remembers its origin so `reef config show` can explain it.
//! A project file may not set keys that widen what tools can do or where credentials go
//! (`sandbox.*`, `providers.*`, …) unless the user trusted its exact bytes with `reef trust`.

mod agent;
mod bot;
mod channels;
mod cluster;
mod daemon;
mod discord;
mod error;
mod gateway;
mod heartbeat;
mod hooks;
mod layers;
mod mcp;
mod memory;
mod project;
mod raw;
mod resolve;
mod routines;
mod safety;
mod sampling;
mod sandbox;
mod secret;
mod secrets;
mod skills;
mod slack;
mod telegram;
mod trust;
mod vault;
mod windows;

pub use agent::AgentConfig;
pub use channels::{
    ChannelConfig, ChannelKind, DEFAULT_AGENT_COOLDOWN_SECS, IrcConfig, Route, valid_nick,
};
pub use cluster::{ClusterConfig, DEFAULT_LEASE_SECS};
pub use daemon::{ApprovalsConfig, DaemonConfig, DashboardConfig, MetricsConfig, TlsSource};
pub use discord::DiscordConfig;
pub use error::ConfigError;
pub use gateway::{DEFAULT_QUIC_PORT, GatewayConfig, QuicConfig};
pub use heartbeat::{DEFAULT_STUCK_AFTER, HeartbeatConfig, JobsConfig, active_window};
pub use hooks::{DEFAULT_MAX_BODY, HookConfig, HookRoute, HooksConfig};
pub use layers::{LoadOptions, Origin};
pub use mcp::{
    ConfigValue, MAX_SERVER_NAME, McpConfig, McpServerConfig, McpTransport, valid_server_name,
};
pub use memory::{DEFAULT_EMBEDDER, EmbedderChoice, FusionChoice, MemoryConfig};
pub use resolve::{
    Config, ConfigEntry, DEFAULT_LOCAL_MODEL, LOCAL_PROVIDER, ModelsConfig, PriceConfig,
    ProviderConfig, ToolsConfig,
};
pub use routines::{
    DEFAULT_MIN_INTERVAL, DEFAULT_RUN_TIMEOUT, RoutineConfig, RoutineFieldError, RoutineFields,
    SchedulerConfig, describe_every, describe_trigger, routine_spec,
    valid_name as valid_routine_name,
};
pub use safety::SafetyConfig;
pub use sandbox::{
    AcceleratorName, MicrovmConfig, NetworkModeName, SandboxBackendName, SandboxConfig,
    check_domain, format_size, parse_size,
};
pub use secret::Secret;
pub use secrets::{check_secret_name, read_secret};
pub use skills::SkillsConfig;
pub use slack::{SlackConfig, SlackMode};
pub use telegram::{TelegramConfig, TelegramMode};
pub use trust::{TRUST_FILE, TrustStatus, Trusted, TrustedFile, trust, trusted_files, untrust};
pub use vault::{PASSPHRASE_ENV, VAULT_FILE, Vault, VaultAccessError};
pub use windows::default_context_tokens;

/// The file name looked up in the home and the project directory.
pub const CONFIG_FILE: &str = "reef.toml";
