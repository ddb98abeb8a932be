//! The configuration layers: where each comes from, how they merge, and the origin of every key.

use crate::error::ConfigError;
use crate::raw;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a resolved value came from, for `reef config show`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", content = "source", rename_all = "snake_case")]
pub enum Origin {
    Default,
    File(PathBuf),
    /// A project file the user trusted (`reef trust`) with these exact bytes.
    TrustedFile(PathBuf),
    Env(String),
    Cli,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::TrustedFile(path) => write!(f, "{} (trusted)", path.display()),
            Origin::Env(var) => write!(f, "env {var}"),
            Origin::Cli => f.write_str("-c"),
        }
    }
}

/// Inputs to configuration loading. The environment is passed in, never read globally,
/// so tests stay hermetic.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// `$REEF_HOME`, or `$HOME/.reef` (see `LoadOptions::from_env`).
    pub home: PathBuf,
    /// The directory whose `reef.toml` overrides the home one (usually the cwd).
    pub project_dir: Option<PathBuf>,
    /// Environment variables to consider (only `REEF_*` and `api_key_env` targets are read).
    pub env: BTreeMap<String, String>,
    /// `key=value` overrides from `-c`.
    pub overrides: Vec<String>,
}

impl LoadOptions {
    /// Builds options from an environment snapshot: the home is `REEF_HOME`, else `HOME/.reef`.
    pub fn from_env(
        env: impl IntoIterator<Item = (String, String)>,
        project_dir: Option<PathBuf>,
        overrides: Vec<String>,
    ) -> Result<Self, ConfigError> {
        let env: BTreeMap<String, String> = env.into_iter().collect();
        let home = match (env.get("REEF_HOME"), env.get("HOME")) {
            (Some(h), _) if !h.is_empty() => PathBuf::from(h),
            (_, Some(h)) if !h.is_empty() => Path::new(h).join(".reef"),
            _ => return Err(ConfigError::NoHome),
        };
        Ok(Self {
            home,
            project_dir,
            env,
            overrides,
        })
    }
}

/// One source of configuration, already parsed and validated on its own.
pub(crate) struct Layer {
    pub origin: Origin,
    pub table: toml::Table,
}

/// The merged table plus the origin of every leaf key.
pub(crate) struct Merged {
    pub table: toml::Table,
    pub origins: BTreeMap<String, Origin>,
    pub files: Vec<PathBuf>,
}

/// The environment variables that override the default provider.
pub(crate) const PROVIDER_ENV: [(&str, &str); 3] = [
    ("REEF_WIRE_API", "wire_api"),
    ("REEF_BASE_URL", "base_url"),
    ("REEF_MODEL", "model"),
];

pub(crate) fn load(opts: &LoadOptions) -> Result<Merged, ConfigError> {
    let mut layers = vec![defaults()];
    let mut files = Vec::new();
    let home_file = opts.home.join(crate::CONFIG_FILE);
    if let Some(layer) = file_layer(&home_file)? {
        files.push(home_file);
        layers.push(layer);
    }
    if let Some(dir) = &opts.project_dir {
        let project_file = dir.join(crate::CONFIG_FILE);
        if !same_dir(dir, &opts.home)
            && let Some(layer) = crate::project::layer(&opts.home, &project_file)?
        {
            files.push(project_file);
            layers.push(layer);
        }
    }
    let cli = cli_layer(&opts.overrides)?;

    // The env layer targets the default provider, whose name the other layers decide.
    let mut without_env = layers.iter().chain(std::iter::once(&cli));
    let default_name = default_provider_name(&mut without_env, &opts.env);
    if let Some(name) = default_name {
        layers.extend(env_layers(&name, &opts.env)?);
    }
    layers.push(cli);

    let mut merged = Merged {
        table: toml::Table::new(),
        origins: BTreeMap::new(),
        files,
    };
    for layer in layers {
        merge_into(
            &mut merged.table,
            layer.table,
            "",
            &layer.origin,
            &mut merged.origins,
        );
    }
    Ok(merged)
}

fn defaults() -> Layer {
    let text = r#"
[model]
cooldown_secs = 30

[agent]
max_rounds = 25
max_wall_secs = 1800
inline_output_chars = 2000
loop_limit = 3
compact_at = 0.75
compaction = "summarize"
keep_recent_turns = 4

[daemon]
listen = "127.0.0.1:7447"
max_concurrent_turns = 4
event_history = 100000
question_ttl_secs = 86400
request_timeout_secs = 600
queue_mode = "followup"
rate_limit = 600

[tools]
shell_timeout_secs = 30
max_shell_output_chars = 10000
http_allow_private = false
http_timeout_secs = 30

[store]
path = "reef.db"

[sandbox]
backend = "landlock"
required = false
network = "none"
allow_domains = []
writable = []
memory = "2G"
file_size = "1G"
cpu_secs = 300
max_processes = 256
open_files = 1024

[sandbox.microvm]
qemu = "qemu-system-x86_64"
memory = "512M"
cpus = 1
pool = 1
snapshot = true
accelerator = "auto"
"#;
    Layer {
        origin: Origin::Default,
        table: text.parse::<toml::Table>().unwrap_or_default(),
    }
}

fn file_layer(path: &Path) -> Result<Option<Layer>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let table = text
        .parse::<toml::Table>()
        .map_err(|err| ConfigError::Syntax {
            path: path.to_owned(),
            message: err.to_string().trim_end().to_owned(),
        })?;
    let origin = Origin::File(path.to_owned());
    validate(&table, &origin)?;
    Ok(Some(Layer { origin, table }))
}

/// Whether two paths name the same directory (after resolving links, when they resolve).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn cli_layer(overrides: &[String]) -> Result<Layer, ConfigError> {
    let mut table = toml::Table::new();
    for arg in overrides {
        let (key, value) = arg.split_once('=').ok_or_else(|| ConfigError::Override {
            arg: arg.clone(),
            reason: "expected key=value, e.g. -c agent.max_rounds=10".into(),
        })?;
        let key = key.trim();
        if key.is_empty() || key.split('.').any(str::is_empty) {
            return Err(ConfigError::Override {
                arg: arg.clone(),
                reason: "the key must be a dotted path such as agent.max_rounds".into(),
            });
        }
        // A value is TOML when it parses as TOML, a plain string otherwise.
        let value = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_owned()));
        insert_path(&mut table, key, value);
    }
    let layer = Layer {
        origin: Origin::Cli,
        table,
    };
    validate(&layer.table, &layer.origin)?;
    Ok(layer)
}

/// One layer per provider variable, so each value's origin names its variable.
fn env_layers(provider: &str, env: &BTreeMap<String, String>) -> Result<Vec<Layer>, ConfigError> {
    let mut layers = Vec::new();
    for (var, field) in PROVIDER_ENV {
        if let Some(value) = env.get(var).filter(|v| !v.is_empty()) {
            let mut table = toml::Table::new();
            insert_path(
                &mut table,
                &format!("providers.{provider}.{field}"),
                toml::Value::String(value.clone()),
            );
            let origin = Origin::Env(var.to_owned());
            validate(&table, &origin)?;
            layers.push(Layer { origin, table });
        }
    }
    Ok(layers)
}

/// Picks the default provider's name: `model.default` from the highest layer that sets it,
/// else the only provider defined, else `main` when the environment defines one.
fn default_provider_name(
    layers: &mut dyn Iterator<Item = &Layer>,
    env: &BTreeMap<String, String>,
) -> Option<String> {
    let mut named = None;
    let mut providers = std::collections::BTreeSet::new();
    for layer in layers {
        if let Some(name) = layer
            .table
            .get("model")
            .and_then(|m| m.get("default"))
            .and_then(|d| match d {
                toml::Value::String(name) => Some(name.as_str()),
                // A failover chain: its first provider is the default.
                toml::Value::Array(chain) => chain.first().and_then(|n| n.as_str()),
                _ => None,
            })
        {
            named = Some(name.to_owned());
        }
        if let Some(toml::Value::Table(p)) = layer.table.get("providers") {
            providers.extend(p.keys().cloned());
        }
    }
    if named.is_some() {
        return named;
    }
    if providers.len() == 1 {
        return providers.into_iter().next();
    }
    let env_defines = PROVIDER_ENV
        .iter()
        .any(|(var, _)| env.get(*var).is_some_and(|v| !v.is_empty()));
    (providers.is_empty() && env_defines).then(|| "main".to_owned())
}

pub(crate) fn validate(table: &toml::Table, origin: &Origin) -> Result<(), ConfigError> {
    raw::parse_table(table)
        .map(|_| ())
        .map_err(|(key, message)| ConfigError::Invalid {
            origin: origin.to_string(),
            key,
            message,
        })
}

fn insert_path(table: &mut toml::Table, dotted: &str, value: toml::Value) {
    let mut parts: Vec<&str> = dotted.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut cur = table;
    for part in parts {
        let entry = cur
            .entry(part.to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(next) = entry else {
            return;
        };
        cur = next;
    }
    cur.insert(last.to_owned(), value);
}

fn merge_into(
    dst: &mut toml::Table,
    src: toml::Table,
    prefix: &str,
    origin: &Origin,
    origins: &mut BTreeMap<String, Origin>,
) {
    for (key, value) in src {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match (dst.get_mut(&key), value) {
            (Some(toml::Value::Table(d)), toml::Value::Table(s)) => {
                merge_into(d, s, &path, origin, origins);
            }
            (_, toml::Value::Table(s)) => {
                let mut fresh = toml::Table::new();
                merge_into(&mut fresh, s, &path, origin, origins);
                dst.insert(key, toml::Value::Table(fresh));
            }
            (_, value) => {
                origins.insert(path, origin.clone());
                dst.insert(key, value);
            }
        }
    }
}
