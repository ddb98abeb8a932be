//! Builds the parts of a session from resolved configuration.

use crate::error::AgentError;
use crate::session::SessionOptions;
use reef_config::{
    AcceleratorName, Config, EmbedderChoice, NetworkModeName, ProviderConfig, SandboxBackendName,
};
use reef_core::ModelClient;
use reef_llm::{EmbedderSettings, ProviderSettings};
use reef_sandbox::{
    Accelerator, HelperCommand, Limits, MicrovmSettings, NetworkMode, Sandbox, SandboxBackend,
    SandboxPolicy,
};
use reef_store::Store;
use reef_tools::{BuiltinConfig, ToolRegistry};
use std::path::{Path, PathBuf};
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
        context_tokens: provider.context_tokens,
        local: provider
            .model_path
            .clone()
            .map(|model_path| reef_llm::LocalModelSettings {
                model_path,
                threads: provider.threads,
            }),
        sampling: provider.sampling,
    }
}

/// The sandbox policy `[sandbox]` asks for, as configured (no check that it works here; see
/// [`sandbox_policy`]). `helper` starts the process that applies a kernel backend, e.g. the
/// `reef` binary with `sandbox-exec`.
pub fn policy_from_config(config: &Config, helper: Option<HelperCommand>) -> SandboxPolicy {
    let s = &config.sandbox;
    SandboxPolicy {
        backend: match s.backend {
            SandboxBackendName::Landlock => SandboxBackend::Landlock,
            SandboxBackendName::None => SandboxBackend::Plain,
            SandboxBackendName::Microvm => SandboxBackend::Microvm,
        },
        network: match s.network {
            NetworkModeName::None => NetworkMode::None,
            NetworkModeName::Allowlist => NetworkMode::Allowlist,
            NetworkModeName::Full => NetworkMode::Full,
        },
        allow_domains: s.allow_domains.clone(),
        writable: s.writable.clone(),
        hidden: hidden_paths(config),
        limits: Limits {
            cpu_secs: Some(s.cpu_secs),
            memory_bytes: Some(s.memory_bytes),
            max_processes: Some(s.max_processes),
            file_size_bytes: Some(s.file_size_bytes),
            open_files: Some(s.open_files),
        },
        helper,
        warm: s.warm,
        microvm: MicrovmSettings {
            qemu: s.microvm.qemu.clone(),
            image: s.microvm.image_in(&config.home),
            memory_mib: s.microvm.memory_mib,
            cpus: s.microvm.cpus,
            pool: s.microvm.pool,
            snapshots: s.microvm.snapshot,
            accelerator: match s.microvm.accelerator {
                AcceleratorName::Auto => Accelerator::Auto,
                AcceleratorName::Kvm => Accelerator::Kvm,
                AcceleratorName::Tcg => Accelerator::Tcg,
            },
        },
        ..SandboxPolicy::default()
    }
}

/// What tools never see, besides the system secrets the sandbox always hides: the user's
/// credential directories, reef's home (an agent's own workspace inside it stays visible),
/// the store with its journal files, audit key and capability root key wherever it lives, the
/// vault and its key file, and every secret file.
fn hidden_paths(config: &Config) -> Vec<PathBuf> {
    let mut hidden = config
        .user_home
        .as_deref()
        .map(reef_sandbox::home_secrets)
        .unwrap_or_default();
    hidden.push(config.home.clone());
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut path = config.store_path.clone().into_os_string();
        path.push(suffix);
        hidden.push(path.into());
    }
    // The audit log's key: with it, the log could be rewritten to match.
    hidden.push(reef_store::audit_key_path(&config.store_path));
    // The capability root key: with it, any token could be minted.
    hidden.push(reef_store::cap_key_path(&config.store_path));
    hidden.extend(config.secrets.iter().filter_map(|s| match &s.source {
        reef_core::SecretSource::File(path) => Some(path.clone()),
        reef_core::SecretSource::Env(_) | reef_core::SecretSource::Vault => None,
    }));
    // The vault and the file holding its passphrase.
    hidden.push(config.vault.path().to_path_buf());
    hidden.extend(config.vault.key_file().map(Path::to_path_buf));
    hidden
}

/// The policy tools run under on this machine, and a warning to show on every turn when they
/// run unconfined.
///
/// With `backend = "landlock"` or `"microvm"` the backend's self-test runs first (for a VM,
/// a boot). If it fails, reef refuses ([`AgentError::SandboxUnavailable`]) when
/// `sandbox.required` is set, and otherwise falls back with a warning: from `microvm` to
/// `landlock` when that works, else to the plain runner. `backend = "none"` always comes with a warning, and is
/// refused when `sandbox.required` is set.
pub async fn sandbox_policy(
    config: &Config,
    helper: Option<HelperCommand>,
) -> Result<(SandboxPolicy, Option<String>), AgentError> {
    let mut policy = policy_from_config(config, helper);
    let required = config.sandbox.required;
    match policy.backend {
        SandboxBackend::Plain if required => Err(AgentError::SandboxUnavailable {
            backend: "none".into(),
            reason: "sandbox.backend is \"none\" but sandbox.required is true".into(),
        }),
        SandboxBackend::Plain => Ok((policy, Some(DISABLED_WARNING.to_owned()))),
        SandboxBackend::Landlock | SandboxBackend::Microvm => {
            match reef_sandbox::self_test(&policy).await {
                Ok(()) => Ok((policy, None)),
                Err(err) if required => Err(AgentError::SandboxUnavailable {
                    backend: policy.backend.as_str().into(),
                    reason: err.to_string(),
                }),
                Err(err) => {
                    if policy.backend == SandboxBackend::Microvm {
                        // A VM that cannot start here still leaves the kernel sandbox.
                        if let Some(landlock) = landlock_instead(&policy, &err).await {
                            return Ok(landlock);
                        }
                    }
                    let warning = fallback_warning(policy.backend.as_str(), &err.to_string());
                    policy.backend = SandboxBackend::Plain;
                    Ok((policy, Some(warning)))
                }
            }
        }
    }
}

/// The landlock backend with a warning saying why, when a microvm policy's VM cannot start
/// here (`err`) and landlock works.
async fn landlock_instead(
    policy: &SandboxPolicy,
    err: &reef_sandbox::SandboxError,
) -> Option<(SandboxPolicy, Option<String>)> {
    let mut landlock = policy.clone();
    landlock.backend = SandboxBackend::Landlock;
    reef_sandbox::self_test(&landlock).await.ok()?;
    let reason = match err {
        reef_sandbox::SandboxError::Unavailable { reason, .. } => reason.clone(),
        other => other.to_string(),
    };
    let warning = format!(
        "the microvm sandbox does not work on this machine ({reason}); tools run in the \
         landlock sandbox instead. Set sandbox.required = true to refuse instead, or see \
         `reef sandbox status`"
    );
    Some((landlock, Some(warning)))
}

/// Shown on every turn when `sandbox.backend = "none"`.
pub const DISABLED_WARNING: &str = "sandbox disabled by config (sandbox.backend = \"none\"): \
     tools run unconfined and can read and write everything your user can";

/// Shown on every turn when the configured backend does not work and reef fell back.
pub fn fallback_warning(backend: &str, reason: &str) -> String {
    format!(
        "the {backend} sandbox does not work on this machine ({reason}); tools run UNCONFINED \
         and can read and write everything your user can. Set sandbox.required = true to refuse \
         instead, or see `reef sandbox status`"
    )
}

/// The built-in tools, running their processes through a sandbox with `policy` (usually from
/// [`sandbox_policy`]).
pub fn builtin_tools(config: &Config, policy: SandboxPolicy) -> Arc<ToolRegistry> {
    Arc::new(builtin_registry(config, policy))
}

/// The built-in tools as a registry the caller can extend or narrow before use.
pub fn builtin_registry(config: &Config, policy: SandboxPolicy) -> ToolRegistry {
    builtin_registry_in(config, Arc::new(Sandbox::new(policy)))
}

/// The built-in tools running their commands in `sandbox` (shared with the agent's skills, so
/// one session's commands share one cgroup and one network log).
pub fn builtin_registry_in(config: &Config, sandbox: Arc<Sandbox>) -> ToolRegistry {
    let tools = BuiltinConfig {
        shell_timeout_secs: config.tools.shell_timeout_secs,
        max_shell_output_chars: config.tools.max_shell_output_chars,
        http_allow_private: config.tools.http_allow_private,
        http_timeout_secs: config.tools.http_timeout_secs,
        secrets: config.secrets.clone(),
        vault: Some(config.vault.clone()),
        leaks: config.safety.leaks.clone(),
        ..BuiltinConfig::default()
    };
    reef_tools::builtin_registry(sandbox, tools)
}

/// The skills of an agent: those `select` names (patterns; empty: all) from reef's home and
/// its workspace, their tools run in `sandbox` (the agent's) and narrowed to `capabilities`,
/// with the agent's `secrets` (its registry's). `None` when `[skills] enabled = false`.
pub fn skill_set(
    config: &Config,
    sandbox: Arc<Sandbox>,
    secrets: Arc<reef_tools::Secrets>,
    select: Vec<String>,
    capabilities: reef_core::Capabilities,
) -> Option<reef_skills::SkillSet> {
    let s = &config.skills;
    if !s.enabled {
        return None;
    }
    let settings = reef_skills::SkillSettings {
        prompt_max_chars: s.prompt_max_chars,
        timeout_secs: s.timeout_secs,
        max_output_chars: config.tools.max_shell_output_chars,
        http_allow_private: config.tools.http_allow_private,
        http_allow_hosts: Vec::new(),
        http_timeout_secs: config.tools.http_timeout_secs,
    };
    let set = reef_skills::SkillSet::new(config.home.clone(), select, settings, sandbox)
        .with_capabilities(capabilities)
        .with_secrets(secrets);
    Some(set)
}

/// Session options from `[agent]`, working in `workspace`.
pub fn session_options(config: &Config, workspace: PathBuf) -> SessionOptions {
    SessionOptions {
        workspace,
        agent: reef_core::DEFAULT_AGENT.to_owned(),
        notes_max_chars: config.memory.notes_max_chars,
        max_rounds: config.agent.max_rounds,
        max_wall: Duration::from_secs(config.agent.max_wall_secs),
        inline_output_chars: config.agent.inline_output_chars,
        system_prompt: config.agent.system_prompt.clone(),
        persona: None,
        token_budget: None,
        loop_limit: config.agent.loop_limit,
        cost_budget_micros: None,
        prices: prices(config),
        compact_at: config.agent.compact_at,
        compaction: config.agent.compaction,
        keep_recent_turns: config.agent.keep_recent_turns,
        profile: config.agent.profile,
        hidden: SandboxPolicy {
            hidden: hidden_paths(config),
            ..SandboxPolicy::default()
        }
        .hidden_paths(),
        safety: config.safety.sources.clone(),
    }
}

/// The built-in prices with `[prices]` from config laid over them.
pub fn prices(config: &Config) -> Arc<reef_llm::Prices> {
    let mut prices = reef_llm::Prices::defaults();
    // A model run in-process costs no money (unless `[prices]` says otherwise below).
    for provider in config.providers.values() {
        if provider.wire_api == reef_core::WireApi::Local {
            prices.set(
                &provider.model,
                reef_llm::Price {
                    input: 0.0,
                    output: 0.0,
                    cached_input: None,
                },
            );
        }
    }
    for (model, p) in &config.prices {
        prices.set(
            model,
            reef_llm::Price {
                input: p.input,
                output: p.output,
                cached_input: p.cached_input,
            },
        );
    }
    Arc::new(prices)
}

/// The model client for `[model] default`: the one provider, or a failover chain over
/// several (each member with its own retries; see `reef_llm::FailoverClient`).
pub fn default_model(config: &Config) -> Result<Arc<dyn ModelClient>, AgentError> {
    let first = config
        .provider()
        .map_err(|e| AgentError::Setup(e.to_string()))?;
    if config.model_chain.len() <= 1 {
        return model_client(first);
    }
    let mut members = Vec::with_capacity(config.model_chain.len());
    for name in &config.model_chain {
        let provider = config.providers.get(name).ok_or_else(|| {
            AgentError::Setup(format!(
                "model.default names `{name}`, which is not configured"
            ))
        })?;
        members.push(model_client(provider)?);
    }
    Ok(Arc::new(reef_llm::FailoverClient::new(
        members,
        Duration::from_secs(config.failover_cooldown_secs),
    )))
}

/// Long-term memory over `store` with the embedder `[memory]` names. When it cannot be built
/// (the model is not pulled, the provider is wrong), memory works by keyword and says why.
pub fn memory(config: &Config, store: Store) -> reef_store::Memory {
    let m = &config.memory;
    let embedder = match &m.embedder {
        EmbedderChoice::None => {
            Err("no embedder is configured ([memory] embedder = \"none\")".to_owned())
        }
        EmbedderChoice::Local { model } => reef_llm::build_embedder(EmbedderSettings::Local {
            name: model.clone(),
            dir: config.models.dir.clone(),
            threads: m.embed_threads.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
            }),
        })
        .map_err(|e| e.to_string()),
        EmbedderChoice::Provider { provider, model } => match config.providers.get(provider) {
            Some(p) => {
                let mut settings = provider_settings(p);
                settings.model = model.clone();
                reef_llm::build_embedder(EmbedderSettings::Http(settings))
                    .map_err(|e| e.to_string())
            }
            None => Err(format!("provider `{provider}` is not configured")),
        },
    };
    reef_store::Memory::new(
        store,
        embedder,
        reef_store::Chunking {
            size: m.chunk_size,
            overlap: m.chunk_overlap,
        },
        memory_fusion(m),
    )
}

/// The fusion `[memory]` configures: its method, with the method's own keyword weight unless
/// one is set.
pub fn memory_fusion(m: &reef_config::MemoryConfig) -> reef_store::Fusion {
    let base = reef_store::Fusion::of(match m.fusion {
        reef_config::FusionChoice::Evidence => reef_store::FusionMethod::Evidence,
        reef_config::FusionChoice::Rrf => reef_store::FusionMethod::Rrf,
    });
    reef_store::Fusion {
        keyword_weight: m.keyword_weight.unwrap_or(base.keyword_weight),
        identifier_weight: m.identifier_weight.unwrap_or(base.identifier_weight),
        vector_weight: m.vector_weight,
        k: m.rrf_k,
        ..base
    }
}

/// Adds the memory tools, acting for agent `agent` (`write_shared`: may write shared memory).
pub fn add_memory_tools(
    registry: &mut ToolRegistry,
    memory: reef_store::Memory,
    agent: &str,
    write_shared: bool,
) {
    for tool in reef_tools::memory_tools(
        memory,
        reef_tools::MemoryScope {
            agent: agent.to_owned(),
            write_shared,
        },
    ) {
        registry.register(tool);
    }
}
