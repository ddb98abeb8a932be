//! Routines: work given to an agent by the clock, an event, a webhook or the operator, and the
//! guardrails around it. These are the definitions as stored and exchanged; reef-schedule
//! checks the time expressions and the runtime runs them.

use serde::{Deserialize, Serialize};

/// What makes a routine fire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Trigger {
    /// A cron expression read in an IANA zone.
    Cron { expr: String, tz: String },
    /// A fixed interval, counted from when the routine was defined.
    Every { millis: u64 },
    /// An event of this kind in the history whose text matches `pattern` (any text when
    /// `None`).
    Event {
        event: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pattern: Option<String>,
    },
    /// A delivery to `[hooks.HOOK]`.
    Webhook { hook: String },
    /// Only when asked (`reef routine run`).
    Manual,
}

impl Trigger {
    /// `true` for the triggers the clock fires.
    pub fn is_timed(&self) -> bool {
        matches!(self, Trigger::Cron { .. } | Trigger::Every { .. })
    }

    /// The trigger's kind as written in `reef.toml`.
    pub fn kind(&self) -> &'static str {
        match self {
            Trigger::Cron { .. } => "cron",
            Trigger::Every { .. } => "every",
            Trigger::Event { .. } => "event",
            Trigger::Webhook { .. } => "webhook",
            Trigger::Manual => "manual",
        }
    }
}

/// What a fire does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// A message to an agent's inbox.
    Message { agent: String, text: String },
    /// A new agent from `template` with `task`, destroyed when it is done or after
    /// `timeout_secs` (its transcript is kept).
    Spawn {
        template: String,
        task: String,
        timeout_secs: u64,
    },
    /// The agent's `HEARTBEAT.md` as a checklist, within `active_hours` (`HH:MM-HH:MM` in
    /// `tz`); a reply that is only `HEARTBEAT_OK` goes nowhere, any other reaches its owner.
    Heartbeat {
        agent: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        active_hours: Option<String>,
        tz: String,
    },
}

/// The whole reply of a heartbeat that found nothing to act on.
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";

/// What happens to a fire while an earlier run of the same routine is still going.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Concurrency {
    /// The fire is recorded as skipped.
    #[default]
    Skip,
    /// The fire waits for the running one to end.
    Queue,
    /// The running one is cancelled and the fire starts.
    Replace,
}

/// What happens to fires that fell due while reef was not running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// They are recorded as skipped.
    #[default]
    Skip,
    /// The newest one runs, the others are skipped.
    Once,
    /// All run, oldest first, at most `catch_up_max` (the newest ones).
    All,
}

/// Limits around a routine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Guardrails {
    #[serde(default)]
    pub concurrency: Concurrency,
    /// Consecutive failed runs after which the routine is disabled (0: never).
    pub max_failures: u32,
    /// Shortest time between two runs of an event- or webhook-triggered routine.
    pub cooldown_secs: u64,
    #[serde(default)]
    pub catch_up: CatchUp,
    pub catch_up_max: u32,
    /// Tokens one run may use (a spawned agent's budget, or the turn's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_tokens: Option<u64>,
    /// Money one run may cost, in millionths of a US dollar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_cost_micros: Option<u64>,
    /// Tokens all runs of one UTC day may use; fires after that are skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_tokens: Option<u64>,
    /// Money all runs of one UTC day may cost, in millionths of a US dollar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_cost_micros: Option<u64>,
}

impl Default for Guardrails {
    fn default() -> Self {
        Guardrails {
            concurrency: Concurrency::Skip,
            max_failures: DEFAULT_MAX_FAILURES,
            cooldown_secs: 0,
            catch_up: CatchUp::Skip,
            catch_up_max: DEFAULT_CATCH_UP_MAX,
            run_tokens: None,
            run_cost_micros: None,
            day_tokens: None,
            day_cost_micros: None,
        }
    }
}

/// Consecutive failures that disable a routine unless it says otherwise.
pub const DEFAULT_MAX_FAILURES: u32 = 3;
/// Missed fires run by `catch_up = "all"` unless the routine says otherwise.
pub const DEFAULT_CATCH_UP_MAX: u32 = 100;

/// A routine's definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutineSpec {
    pub trigger: Trigger,
    pub action: Action,
    #[serde(default)]
    pub guardrails: Guardrails,
}
