//! Checks a routine's definition before it is stored: time expressions, intervals against
//! the configured minimum, event patterns, and guardrails that make sense together. The
//! error names the field as `reef.toml` spells it.

use crate::cron::CronExpr;
use crate::duration::format_duration;
use crate::schedule::Schedule;
use crate::zone::parse_zone;
use chrono::{DateTime, Utc};
use reef_core::{Action, RoutineSpec, Trigger};
use std::time::Duration;

/// The longest a spawned run may take.
pub const MAX_TIMEOUT_SECS: u64 = 7 * 24 * 3600;

/// A definition that cannot be used: `field` is the key to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RoutineError {
    pub field: &'static str,
    pub message: String,
}

fn fail(field: &'static str, message: impl Into<String>) -> RoutineError {
    RoutineError {
        field,
        message: message.into(),
    }
}

/// Checks `spec`; `min_interval` is `[scheduler] min_interval`.
pub fn check_routine(spec: &RoutineSpec, min_interval: Duration) -> Result<(), RoutineError> {
    match &spec.trigger {
        Trigger::Cron { expr, tz } => {
            let zone = parse_zone(tz).map_err(|e| fail("tz", e.to_string()))?;
            let cron = CronExpr::parse(expr, zone).map_err(|e| fail("cron", e.to_string()))?;
            // The shortest gap between the next few fires: `* * * * * *` is every second.
            let mut at = chrono::Utc::now();
            for _ in 0..8 {
                let (Some(a), Some(b)) = (
                    cron.next_after(at),
                    cron.next_after(at).and_then(|a| cron.next_after(a)),
                ) else {
                    break;
                };
                let gap = (b - a).to_std().unwrap_or_default();
                if gap < min_interval {
                    return Err(fail(
                        "cron",
                        format!(
                            "\"{expr}\" fires {} apart, more often than scheduler.min_interval ({})",
                            format_duration(gap),
                            format_duration(min_interval)
                        ),
                    ));
                }
                at = b;
            }
        }
        Trigger::Every { millis } => {
            let period = Duration::from_millis(*millis);
            if period < min_interval {
                return Err(fail(
                    "every",
                    format!(
                        "{} is shorter than scheduler.min_interval ({})",
                        format_duration(period),
                        format_duration(min_interval)
                    ),
                ));
            }
        }
        Trigger::Event { event, pattern } => {
            if spec.guardrails.cooldown_secs < min_interval.as_secs() {
                return Err(fail(
                    "cooldown",
                    format!(
                        "an event routine waits at least scheduler.min_interval ({}) between runs",
                        format_duration(min_interval)
                    ),
                ));
            }
            if event.trim().is_empty() {
                return Err(fail("event", "names no event kind; e.g. \"agent.failed\""));
            }
            if let Some(pattern) = pattern {
                regex::Regex::new(pattern)
                    .map_err(|e| fail("match", format!("is not a regular expression: {e}")))?;
            }
        }
        Trigger::Webhook { hook } => {
            if hook.trim().is_empty() {
                return Err(fail("webhook", "names no [hooks.NAME]"));
            }
        }
        Trigger::Manual => {}
    }
    match &spec.action {
        Action::Message { agent, text } => {
            if agent.trim().is_empty() {
                return Err(fail("agent", "names no agent"));
            }
            if text.trim().is_empty() {
                return Err(fail("message", "is empty; say what the agent should do"));
            }
        }
        Action::Spawn {
            template,
            task,
            timeout_secs,
        } => {
            if template.trim().is_empty() {
                return Err(fail("template", "names no template"));
            }
            if task.trim().is_empty() {
                return Err(fail("task", "is empty; say what the agent should do"));
            }
            if *timeout_secs == 0 || *timeout_secs > MAX_TIMEOUT_SECS {
                return Err(fail("timeout", "must be longer than 0s and at most 7d"));
            }
        }
        Action::Heartbeat { agent, tz, .. } => {
            if agent.trim().is_empty() {
                return Err(fail("agent", "names no agent"));
            }
            parse_zone(tz).map_err(|e| fail("tz", e.to_string()))?;
        }
    }
    let guard = &spec.guardrails;
    if !matches!(spec.action, Action::Spawn { .. }) {
        if guard.run_tokens.is_some() {
            return Err(fail(
                "run_tokens",
                "applies to spawned runs (`template`); a message runs under its agent's own budget",
            ));
        }
        if guard.run_cost_micros.is_some() {
            return Err(fail(
                "run_cost",
                "applies to spawned runs (`template`); a message runs under its agent's own budget",
            ));
        }
    }
    if spec.guardrails.catch_up_max == 0 {
        return Err(fail("catch_up_max", "must be at least 1"));
    }
    Ok(())
}

/// When a timed trigger fires: `None` for the other kinds. An interval counts from `anchor`.
pub fn schedule_of(
    trigger: &Trigger,
    anchor: DateTime<Utc>,
) -> Result<Option<Schedule>, RoutineError> {
    Ok(match trigger {
        Trigger::Cron { expr, tz } => {
            let zone = parse_zone(tz).map_err(|e| fail("tz", e.to_string()))?;
            let expr = CronExpr::parse(expr, zone).map_err(|e| fail("cron", e.to_string()))?;
            Some(Schedule::Cron(Box::new(expr)))
        }
        Trigger::Every { millis } => Some(Schedule::Every {
            period: Duration::from_millis((*millis).max(1)),
            anchor,
        }),
        _ => None,
    })
}
