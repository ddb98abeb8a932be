//! `[heartbeat]` and `[jobs]`. A heartbeat wakes chosen agents every `every` (within
//! `active_hours`, in `tz`) with their workspace's `HEARTBEAT.md` as a checklist; a job with no
//! progress for `jobs.stuck_after` is failed as stuck.

use crate::error::ConfigError;
use reef_schedule::{format_duration, parse_duration, parse_zone, system_zone};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeartbeatToml {
    pub every: Option<String>,
    pub active_hours: Option<String>,
    pub tz: Option<String>,
    pub agents: Option<Vec<String>>,
    pub templates: Option<Vec<String>>,
    pub channel: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobsToml {
    pub stuck_after: Option<String>,
}

/// `[heartbeat]`, when it has an `every`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatConfig {
    pub every: Duration,
    /// `HH:MM-HH:MM` (it may wrap past midnight); `None` is all day.
    pub active_hours: Option<String>,
    /// IANA zone of `active_hours`; the system's when not set.
    pub tz: String,
    /// Agents by name that get a heartbeat.
    pub agents: Vec<String>,
    /// Templates whose agents get one. With neither list, every agent does.
    pub templates: Vec<String>,
    /// The `[channels.NAME]` whose control room hears findings of agents with no parent;
    /// `None` is every channel's.
    pub channel: Option<String>,
}

impl HeartbeatConfig {
    /// Whether an agent named `name` of `template` gets a heartbeat.
    pub fn selects(&self, name: &str, template: &str) -> bool {
        (self.agents.is_empty() && self.templates.is_empty())
            || self.agents.iter().any(|a| a == name)
            || self.templates.iter().any(|t| t == template)
    }
}

/// `[jobs]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobsConfig {
    /// A job with no progress for this long is failed as stuck (default 30 min).
    pub stuck_after: Duration,
}

/// `[jobs] stuck_after` when not set.
pub const DEFAULT_STUCK_AFTER: Duration = Duration::from_secs(30 * 60);

/// Minutes after midnight of `HH:MM-HH:MM`'s ends.
pub fn active_window(text: &str) -> Result<(u32, u32), String> {
    let minutes = |part: &str| -> Option<u32> {
        let (h, m) = part.trim().split_once(':')?;
        let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
        (h <= 24 && m < 60 && h * 60 + m <= 24 * 60).then_some(h * 60 + m)
    };
    let (from, to) = text
        .split_once('-')
        .and_then(|(a, b)| Some((minutes(a)?, minutes(b)?)))
        .ok_or_else(|| format!("\"{text}\" is not a window like \"08:00-22:00\""))?;
    if from == to {
        return Err(format!(
            "\"{text}\" is empty; leave active_hours out for all day"
        ));
    }
    Ok((from, to))
}

pub(crate) fn resolve_jobs(
    raw: JobsToml,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<JobsConfig, ConfigError> {
    let stuck_after = match raw.stuck_after {
        None => DEFAULT_STUCK_AFTER,
        Some(text) => parse_duration(&text).map_err(|e| ConfigError::Invalid {
            origin: origin_of("jobs.stuck_after"),
            key: "jobs.stuck_after".into(),
            message: e.to_string(),
        })?,
    };
    if stuck_after < Duration::from_secs(1) {
        return Err(ConfigError::Invalid {
            origin: origin_of("jobs.stuck_after"),
            key: "jobs.stuck_after".into(),
            message: "must be at least 1s".into(),
        });
    }
    Ok(JobsConfig { stuck_after })
}

pub(crate) fn resolve(
    raw: Option<HeartbeatToml>,
    min_interval: Duration,
    channels: &[&str],
    origin_of: &dyn Fn(&str) -> String,
) -> Result<Option<HeartbeatConfig>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let invalid = |field: &str, message: String| {
        let key = format!("heartbeat.{field}");
        ConfigError::Invalid {
            origin: origin_of(&key),
            key,
            message,
        }
    };
    let Some(every) = raw.every else {
        return Err(invalid("every", "missing; e.g. \"30m\"".into()));
    };
    let every = parse_duration(&every).map_err(|e| invalid("every", e.to_string()))?;
    if every < min_interval {
        return Err(invalid(
            "every",
            format!(
                "{} is shorter than scheduler.min_interval ({})",
                format_duration(every),
                format_duration(min_interval)
            ),
        ));
    }
    if let Some(window) = &raw.active_hours {
        active_window(window).map_err(|m| invalid("active_hours", m))?;
    }
    let tz = match raw.tz {
        Some(tz) => parse_zone(&tz)
            .map_err(|e| invalid("tz", e.to_string()))?
            .name()
            .to_owned(),
        None => system_zone().name().to_owned(),
    };
    if let Some(channel) = &raw.channel
        && !channels.contains(&channel.as_str())
    {
        return Err(invalid(
            "channel",
            format!("names `{channel}`, but no [channels.{channel}] is defined"),
        ));
    }
    Ok(Some(HeartbeatConfig {
        every,
        active_hours: raw.active_hours,
        tz,
        agents: raw.agents.unwrap_or_default(),
        templates: raw.templates.unwrap_or_default(),
        channel: raw.channel,
    }))
}
