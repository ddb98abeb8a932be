//! Agent templates: data files naming a persona, a model, the tools and budget an agent gets,
//! and how its sandbox differs from `[sandbox]`. Six ship with reef; files in
//! `$REEF_HOME/templates/NAME.toml` replace a built-in of the same name or add new ones.

use reef_config::{NetworkModeName, SandboxConfig, check_domain, parse_size};
use reef_core::{Budget, Capabilities};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The templates that ship with reef, as `(name, TOML)`.
pub const BUILTIN_TEMPLATES: [(&str, &str); 6] = [
    ("coder", include_str!("../templates/coder.toml")),
    ("creative", include_str!("../templates/creative.toml")),
    ("manager", include_str!("../templates/manager.toml")),
    ("quick", include_str!("../templates/quick.toml")),
    ("researcher", include_str!("../templates/researcher.toml")),
    ("worker", include_str!("../templates/worker.toml")),
];

/// Where a template came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateSource {
    Builtin,
    File(PathBuf),
}

/// One template, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    pub name: String,
    pub description: String,
    pub persona: String,
    /// Provider name; `None` uses the default provider.
    pub model: Option<String>,
    pub capabilities: Capabilities,
    pub budget: Budget,
    pub sandbox: SandboxOverrides,
    /// What happens to messages that arrive mid-turn; `None` uses `daemon.queue_mode`.
    pub queue_mode: Option<reef_core::QueueMode>,
    /// The `[channels.NAME]` its agents appear on; `None` is every channel.
    pub channels: Option<Vec<String>>,
    /// `schedule = "…"`: an agent of this template is spawned at each fire (`NAME-cron-N`),
    /// reports to `#agents` and is destroyed when done or after `schedule_timeout`.
    pub schedule: Option<TemplateSchedule>,
    /// `skills = ["pdf", "git-*"]`: the skills its agents get, by name pattern (`*` and `?`);
    /// empty: every skill.
    pub skills: Vec<String>,
    /// `mcp = ["github"]`: MCP servers its agents get besides those offered to every
    /// template (`[mcp.servers.NAME] templates`).
    pub mcp: Vec<String>,
    pub source: TemplateSource,
}

/// A template's own schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateSchedule {
    pub cron: String,
    /// IANA zone; the system's when not set.
    pub tz: String,
    pub timeout_secs: u64,
    pub task: String,
}

/// The task a scheduled agent gets when its template names none.
pub const DEFAULT_SCHEDULE_TASK: &str =
    "It is time for your scheduled run: do what your instructions describe, then report.";

impl Template {
    /// The routine a `schedule` becomes: spawn an agent of this template at each fire.
    pub fn schedule_spec(&self) -> Option<reef_core::RoutineSpec> {
        let schedule = self.schedule.as_ref()?;
        Some(reef_core::RoutineSpec {
            trigger: reef_core::Trigger::Cron {
                expr: schedule.cron.clone(),
                tz: schedule.tz.clone(),
            },
            action: reef_core::Action::Spawn {
                template: self.name.clone(),
                task: schedule.task.clone(),
                timeout_secs: schedule.timeout_secs,
            },
            guardrails: reef_core::Guardrails::default(),
        })
    }

    /// Whether agents from this template appear on channel `name`.
    pub fn on_channel(&self, name: &str) -> bool {
        self.channels
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == name))
    }
}

/// How an agent's sandbox differs from the configured `[sandbox]`; unset fields keep it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxOverrides {
    pub network: Option<NetworkModeName>,
    pub allow_domains: Vec<String>,
    pub memory_bytes: Option<u64>,
    pub max_processes: Option<u64>,
}

impl SandboxOverrides {
    /// `base` with these overrides laid over it.
    pub fn apply(&self, base: &SandboxConfig) -> SandboxConfig {
        let mut out = base.clone();
        if let Some(network) = self.network {
            out.network = network;
        }
        out.allow_domains.extend(self.allow_domains.iter().cloned());
        if let Some(memory) = self.memory_bytes {
            out.memory_bytes = memory;
        }
        if let Some(n) = self.max_processes {
            out.max_processes = n;
        }
        out
    }
}

/// A template file that could not be used; the message names the file, the key and the fix.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The templates directory or a file in it could not be read; check permissions.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A template is not valid; fix the named key.
    #[error("template {origin}: {key}{message}")]
    Invalid {
        origin: String,
        key: String,
        message: String,
    },
}

/// Every available template by name.
#[derive(Clone, Debug)]
pub struct Templates {
    by_name: BTreeMap<String, Template>,
}

impl Templates {
    /// The built-in templates only.
    pub fn builtin() -> Result<Templates, TemplateError> {
        let mut by_name = BTreeMap::new();
        for (name, text) in BUILTIN_TEMPLATES {
            let template = parse(name, text, TemplateSource::Builtin)?;
            by_name.insert(name.to_owned(), template);
        }
        Ok(Templates { by_name })
    }

    /// The built-ins, then every `*.toml` in `dir` (usually `$REEF_HOME/templates`), which
    /// replaces a built-in of the same name. A missing directory is not an error.
    pub fn load(dir: &Path) -> Result<Templates, TemplateError> {
        let mut templates = Templates::builtin()?;
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(templates),
            Err(source) => {
                return Err(TemplateError::Read {
                    path: dir.to_path_buf(),
                    source,
                });
            }
        };
        let mut files: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| TemplateError::Read {
                path: dir.to_path_buf(),
                source,
            })?;
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "toml") {
                files.push(path);
            }
        }
        files.sort();
        for path in files {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            let origin = path.display().to_string();
            check_name(&name).map_err(|message| TemplateError::Invalid {
                origin: origin.clone(),
                key: String::new(),
                message: format!("the file name {message}"),
            })?;
            let text = std::fs::read_to_string(&path).map_err(|source| TemplateError::Read {
                path: path.clone(),
                source,
            })?;
            let template = parse(&name, &text, TemplateSource::File(path))?;
            templates.by_name.insert(name, template);
        }
        Ok(templates)
    }

    pub fn get(&self, name: &str) -> Option<&Template> {
        self.by_name.get(name)
    }

    /// Template names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.by_name.keys().map(String::as_str).collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Template> {
        self.by_name.values()
    }
}

/// Template names become file names and appear in commands: keep them plain.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a template name: use 1-64 of a-z, 0-9, - and _"
        ))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateToml {
    description: String,
    persona: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    capabilities: Option<Capabilities>,
    #[serde(default)]
    budget: Budget,
    #[serde(default)]
    sandbox: SandboxToml,
    #[serde(default)]
    queue_mode: Option<reef_core::QueueMode>,
    #[serde(default)]
    channels: Option<Vec<String>>,
    #[serde(default)]
    schedule: Option<String>,
    #[serde(default)]
    schedule_tz: Option<String>,
    #[serde(default)]
    schedule_timeout: Option<String>,
    #[serde(default)]
    schedule_task: Option<String>,
    #[serde(default)]
    skills: Option<Vec<String>>,
    #[serde(default)]
    mcp: Vec<String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxToml {
    network: Option<NetworkModeName>,
    #[serde(default)]
    allow_domains: Vec<String>,
    memory: Option<String>,
    max_processes: Option<u64>,
}

fn parse(name: &str, text: &str, source: TemplateSource) -> Result<Template, TemplateError> {
    let origin = match &source {
        TemplateSource::Builtin => format!("{name} (built in)"),
        TemplateSource::File(path) => path.display().to_string(),
    };
    let invalid = |key: &str, message: String| TemplateError::Invalid {
        origin: origin.clone(),
        key: if key.is_empty() {
            String::new()
        } else {
            format!("key `{key}`: ")
        },
        message,
    };
    let table: toml::Table = toml::from_str(text).map_err(|e| invalid("", e.to_string()))?;
    let raw: TemplateToml = serde_path_to_error::deserialize(toml::Value::Table(table))
        .map_err(|e| invalid(&e.path().to_string(), e.into_inner().to_string()))?;
    if raw.persona.trim().is_empty() {
        return Err(invalid("persona", "must not be empty".into()));
    }
    let capabilities = raw.capabilities.unwrap_or_default();
    if capabilities.tools.is_empty() {
        return Err(invalid(
            "capabilities.tools",
            "lists no tool; use [\"*\"] for all tools".into(),
        ));
    }
    for domain in &raw.sandbox.allow_domains {
        check_domain(domain).map_err(|m| invalid("sandbox.allow_domains", m))?;
    }
    let memory_bytes = raw
        .sandbox
        .memory
        .as_deref()
        .map(parse_size)
        .transpose()
        .map_err(|m| invalid("sandbox.memory", m))?;
    if raw.sandbox.max_processes == Some(0) {
        return Err(invalid(
            "sandbox.max_processes",
            "must be at least 1".into(),
        ));
    }
    let schedule = match raw.schedule {
        None => {
            if raw.schedule_tz.is_some()
                || raw.schedule_timeout.is_some()
                || raw.schedule_task.is_some()
            {
                return Err(invalid(
                    "schedule",
                    "missing; schedule_tz, schedule_timeout and schedule_task go with it".into(),
                ));
            }
            None
        }
        Some(cron) => {
            let zone = match &raw.schedule_tz {
                Some(tz) => reef_schedule::parse_zone(tz)
                    .map_err(|e| invalid("schedule_tz", e.to_string()))?,
                None => reef_schedule::system_zone(),
            };
            reef_schedule::CronExpr::parse(&cron, zone)
                .map_err(|e| invalid("schedule", e.to_string()))?;
            let timeout = match &raw.schedule_timeout {
                Some(text) => reef_schedule::parse_duration(text)
                    .map_err(|e| invalid("schedule_timeout", e.to_string()))?,
                None => reef_config::DEFAULT_RUN_TIMEOUT,
            };
            if timeout.as_secs() == 0 || timeout.as_secs() > reef_schedule::MAX_TIMEOUT_SECS {
                return Err(invalid(
                    "schedule_timeout",
                    "must be at least 1s and at most 7d".into(),
                ));
            }
            Some(TemplateSchedule {
                cron,
                tz: zone.name().to_owned(),
                timeout_secs: timeout.as_secs(),
                task: raw
                    .schedule_task
                    .unwrap_or_else(|| DEFAULT_SCHEDULE_TASK.to_owned()),
            })
        }
    };
    let skills = raw.skills.unwrap_or_default();
    let pattern = |p: &String| {
        let plain = p
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '*' | '?'));
        !p.is_empty() && p.len() <= 64 && plain
    };
    if let Some(bad) = skills.iter().find(|p| !pattern(p)) {
        let why = "is not a skill name pattern (lowercase letters, digits, -, and * or ?)";
        return Err(invalid("skills", format!("{bad:?} {why}")));
    }
    if let Some(bad) = raw.mcp.iter().find(|n| !reef_config::valid_server_name(n)) {
        let why = "cannot name an MCP server (letters, digits, - and _)";
        return Err(invalid("mcp", format!("{bad:?} {why}")));
    }
    Ok(Template {
        name: name.to_owned(),
        description: raw.description,
        persona: raw.persona.trim().to_owned(),
        model: raw.model,
        capabilities,
        budget: raw.budget,
        sandbox: SandboxOverrides {
            network: raw.sandbox.network,
            allow_domains: raw.sandbox.allow_domains,
            memory_bytes,
            max_processes: raw.sandbox.max_processes,
        },
        queue_mode: raw.queue_mode,
        channels: raw.channels,
        schedule,
        skills,
        mcp: raw.mcp,
        source,
    })
}
