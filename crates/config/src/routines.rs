//! `[scheduler]` and `[routines.NAME]`: routines declared in the configuration (reconciled
//! into the store at every start) and the scheduler's limits. Each routine has one trigger
//! (`cron` + `tz`, `every`, `event` + `match`, `webhook`, or `manual = true`) and one action
//! (`agent` + `message`, or `template` + `task` + `timeout`), with its guardrails.

use crate::error::ConfigError;
use reef_core::{Action, CatchUp, Concurrency, Guardrails, RoutineSpec, Trigger};
use reef_schedule::{check_routine, format_duration, parse_duration, system_zone};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SchedulerToml {
    pub min_interval: Option<String>,
}

/// A routine's keys as written in `[routines.NAME]`, in the HTTP API and by agents' tools:
/// one trigger, one action, guardrails.
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutineFields {
    /// A cron expression: 5 or 6 fields, names, or @hourly-style shortcuts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The cron expression's IANA time zone (default: the system's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// A fixed interval such as "5m" (at least `scheduler.min_interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// An event kind (`agent.state_changed`; a trailing `*` matches a prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// A regular expression the event's text must match.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The `[hooks.NAME]` whose deliveries fire it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// Fired only by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual: Option<bool>,
    /// Message this agent ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// ... with this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Or spawn an agent from this template ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// ... with this task ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// ... destroyed after this long ("15m" by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// skip (default), queue or replace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<String>,
    /// Failed runs in a row that disable it (default 3; 0 never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<u32>,
    /// Shortest time between runs of an event or webhook routine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown: Option<String>,
    /// skip (default), once or all: fires missed while reef was down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<String>,
    /// The most missed fires `catch_up = "all"` runs (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up_max: Option<u32>,
    /// Tokens one run may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_tokens: Option<u64>,
    /// US dollars one run may cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_cost: Option<f64>,
    /// Tokens all runs of a UTC day may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_tokens: Option<u64>,
    /// US dollars all runs of a UTC day may cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_cost: Option<f64>,
    /// Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// A routine definition that cannot be used: `field` is the key to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RoutineFieldError {
    pub field: String,
    pub message: String,
}

/// Reads and checks a routine's keys (the same rules as `[routines.NAME]`).
pub fn routine_spec(
    fields: RoutineFields,
    scheduler: &SchedulerConfig,
) -> Result<(RoutineSpec, bool), RoutineFieldError> {
    let invalid = |field: &str, message: String| ConfigError::Invalid {
        origin: String::new(),
        key: field.to_owned(),
        message,
    };
    let enabled = fields.enabled.unwrap_or(true);
    let unpack = |e: ConfigError| match e {
        ConfigError::Invalid { key, message, .. } => RoutineFieldError {
            field: if key.is_empty() {
                "routine".into()
            } else {
                key
            },
            message,
        },
        other => RoutineFieldError {
            field: "routine".into(),
            message: other.to_string(),
        },
    };
    let spec = spec(fields, scheduler.min_interval, &invalid).map_err(unpack)?;
    check_routine(&spec, scheduler.min_interval).map_err(|e| RoutineFieldError {
        field: e.field.to_owned(),
        message: e.message,
    })?;
    Ok((spec, enabled))
}

/// `[scheduler]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// The shortest `every` a routine or heartbeat may have (default 60 s).
    pub min_interval: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            min_interval: DEFAULT_MIN_INTERVAL,
        }
    }
}

/// `[scheduler] min_interval` when not set.
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_secs(60);
/// A spawned routine agent's `timeout` when not set.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// One `[routines.NAME]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutineConfig {
    pub name: String,
    pub spec: RoutineSpec,
    pub enabled: bool,
}

pub(crate) fn resolve_scheduler(
    raw: SchedulerToml,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<SchedulerConfig, ConfigError> {
    let duration = |key: &str, text: Option<String>, default: Duration| match text {
        None => Ok(default),
        Some(text) => parse_duration(&text).map_err(|e| ConfigError::Invalid {
            origin: origin_of(key),
            key: key.into(),
            message: e.to_string(),
        }),
    };
    let min_interval = duration(
        "scheduler.min_interval",
        raw.min_interval,
        DEFAULT_MIN_INTERVAL,
    )?;
    if min_interval < Duration::from_secs(1) {
        return Err(ConfigError::Invalid {
            origin: origin_of("scheduler.min_interval"),
            key: "scheduler.min_interval".into(),
            message: "must be at least 1s".into(),
        });
    }
    Ok(SchedulerConfig { min_interval })
}

pub(crate) fn resolve(
    raw: BTreeMap<String, RoutineFields>,
    scheduler: &SchedulerConfig,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<BTreeMap<String, RoutineConfig>, ConfigError> {
    let mut out = BTreeMap::new();
    for (name, routine) in raw {
        let invalid = |field: &str, message: String| {
            let key = if field.is_empty() {
                format!("routines.{name}")
            } else {
                format!("routines.{name}.{field}")
            };
            ConfigError::Invalid {
                origin: origin_of(&key),
                key,
                message,
            }
        };
        if !valid_name(&name) {
            let key = format!("routines.{name}");
            return Err(ConfigError::Invalid {
                origin: origin_of(&key),
                key,
                message: "a routine's name: use 1-64 of a-z, 0-9, - and _, starting with a letter"
                    .into(),
            });
        }
        let enabled = routine.enabled.unwrap_or(true);
        let spec = spec(routine, scheduler.min_interval, &invalid)?;
        check_routine(&spec, scheduler.min_interval).map_err(|e| invalid(e.field, e.message))?;
        out.insert(
            name.clone(),
            RoutineConfig {
                name,
                spec,
                enabled,
            },
        );
    }
    Ok(out)
}

/// Which routine each hook fires (`webhook = "HOOK"`); one routine per hook.
pub(crate) fn hooks_routed(
    raw: &BTreeMap<String, RoutineFields>,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut routed = BTreeMap::new();
    for (name, routine) in raw {
        if let Some(hook) = &routine.webhook
            && let Some(other) = routed.insert(hook.clone(), name.clone())
        {
            let key = format!("routines.{name}.webhook");
            return Err(ConfigError::Invalid {
                origin: origin_of(&key),
                key,
                message: format!("[hooks.{hook}] already fires [routines.{other}]"),
            });
        }
    }
    Ok(routed)
}

/// Whether `name` can name a routine (it appears in agent names and URLs).
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn spec(
    raw: RoutineFields,
    min_interval: Duration,
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<RoutineSpec, ConfigError> {
    let duration =
        |field: &str, text: &str| parse_duration(text).map_err(|e| invalid(field, e.to_string()));
    let mut triggers = Vec::new();
    if let Some(expr) = raw.cron {
        let tz = match raw.tz {
            Some(tz) => tz,
            None => system_zone().name().to_owned(),
        };
        triggers.push(Trigger::Cron { expr, tz });
    } else if raw.tz.is_some() {
        return Err(invalid("tz", "is only used with `cron`".into()));
    }
    if let Some(every) = raw.every {
        let period = duration("every", &every)?;
        triggers.push(Trigger::Every {
            millis: u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
        });
    }
    if let Some(event) = raw.event {
        triggers.push(Trigger::Event {
            event,
            pattern: raw.pattern,
        });
    } else if raw.pattern.is_some() {
        return Err(invalid("match", "is only used with `event`".into()));
    }
    if let Some(hook) = raw.webhook {
        triggers.push(Trigger::Webhook { hook });
    }
    if raw.manual == Some(true) {
        triggers.push(Trigger::Manual);
    }
    let trigger = match triggers.len() {
        1 => triggers.remove(0),
        0 => {
            return Err(invalid(
                "",
                "has no trigger; set one of cron, every, event, webhook or manual = true".into(),
            ));
        }
        _ => {
            let kinds: Vec<&str> = triggers.iter().map(Trigger::kind).collect();
            return Err(invalid(
                kinds[1],
                format!(
                    "a routine has one trigger, but this one sets {}",
                    kinds.join(" and ")
                ),
            ));
        }
    };
    let action = match (raw.agent, raw.template) {
        (Some(agent), None) => {
            if raw.task.is_some() || raw.timeout.is_some() {
                return Err(invalid(
                    "task",
                    "`task` and `timeout` go with `template`; an agent gets a `message`".into(),
                ));
            }
            Action::Message {
                agent,
                text: raw.message.ok_or_else(|| {
                    invalid("message", "missing; what should the agent be told?".into())
                })?,
            }
        }
        (None, Some(template)) => {
            if raw.message.is_some() {
                return Err(invalid(
                    "message",
                    "a spawned agent gets a `task`, not a `message`".into(),
                ));
            }
            let timeout = match raw.timeout {
                Some(text) => duration("timeout", &text)?,
                None => DEFAULT_RUN_TIMEOUT,
            };
            Action::Spawn {
                template,
                task: raw.task.ok_or_else(|| {
                    invalid("task", "missing; what should the new agent do?".into())
                })?,
                timeout_secs: timeout.as_secs().max(1),
            }
        }
        (Some(_), Some(_)) => {
            return Err(invalid(
                "template",
                "set `agent` (message an agent) or `template` (spawn one), not both".into(),
            ));
        }
        (None, None) => {
            return Err(invalid(
                "",
                "has no action; set `agent` + `message`, or `template` + `task`".into(),
            ));
        }
    };
    let mut guardrails = Guardrails::default();
    if let Some(text) = raw.concurrency {
        guardrails.concurrency = match text.as_str() {
            "skip" => Concurrency::Skip,
            "queue" => Concurrency::Queue,
            "replace" => Concurrency::Replace,
            _ => {
                return Err(invalid(
                    "concurrency",
                    format!("`{text}` is not skip, queue or replace"),
                ));
            }
        };
    }
    if let Some(text) = raw.catch_up {
        guardrails.catch_up = match text.as_str() {
            "skip" => CatchUp::Skip,
            "once" => CatchUp::Once,
            "all" => CatchUp::All,
            _ => {
                return Err(invalid(
                    "catch_up",
                    format!("`{text}` is not skip, once or all"),
                ));
            }
        };
    }
    if let Some(n) = raw.max_failures {
        guardrails.max_failures = n;
    }
    if let Some(n) = raw.catch_up_max {
        guardrails.catch_up_max = n;
    }
    match raw.cooldown {
        Some(text) => guardrails.cooldown_secs = duration("cooldown", &text)?.as_secs(),
        // An event routine waits at least the shortest interval between runs by default.
        None if matches!(trigger, Trigger::Event { .. }) => {
            guardrails.cooldown_secs = min_interval.as_secs();
        }
        None => {}
    }
    guardrails.run_tokens = raw.run_tokens;
    guardrails.day_tokens = raw.day_tokens;
    guardrails.run_cost_micros = dollars("run_cost", raw.run_cost, invalid)?;
    guardrails.day_cost_micros = dollars("day_cost", raw.day_cost, invalid)?;
    Ok(RoutineSpec {
        trigger,
        action,
        guardrails,
    })
}

fn dollars(
    field: &str,
    value: Option<f64>,
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<Option<u64>, ConfigError> {
    match value {
        None => Ok(None),
        Some(v) if (0.0..1e9).contains(&v) => {
            // Finite, non-negative and below 1e9 dollars: the cast is exact enough.
            let micros = (v * 1_000_000.0).round() as u64;
            Ok(Some(micros))
        }
        Some(v) => Err(invalid(
            field,
            format!("{v} is not an amount in US dollars"),
        )),
    }
}

/// For `reef config show` and messages: `every = "2s"`-style text of an interval.
pub fn describe_every(millis: u64) -> String {
    format_duration(Duration::from_millis(millis))
}

/// A trigger in a few words: `every 2s`, `cron 0 9 * * MON-FRI (Europe/Berlin)`,
/// `event agent.* ~ failed`, `webhook deploy`, `manual`.
pub fn describe_trigger(trigger: &reef_core::Trigger) -> String {
    use reef_core::Trigger;
    match trigger {
        Trigger::Cron { expr, tz } => format!("cron {expr} ({tz})"),
        Trigger::Every { millis } => format!("every {}", describe_every(*millis)),
        Trigger::Event {
            event,
            pattern: Some(p),
        } => format!("event {event} ~ {p}"),
        Trigger::Event {
            event,
            pattern: None,
        } => format!("event {event}"),
        Trigger::Webhook { hook } => format!("webhook {hook}"),
        Trigger::Manual => "manual".into(),
    }
}
