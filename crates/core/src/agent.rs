//! Durable agents' vocabulary: the lifecycle state machine and budgets, with the rule that a
//! child is never given more than its parent holds.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where an agent is in its life. Only the transitions of [`AgentState::can_become`] exist;
/// `completed`, `failed` and `terminated` are final.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// Created, not started yet.
    Pending,
    /// Accepting messages; runs turns while its inbox has work.
    Running,
    /// Keeps its inbox but runs no turns until resumed.
    Paused,
    /// Finished its task by itself.
    Completed,
    /// Stopped by an error or an exhausted budget.
    Failed,
    /// Stopped by the operator or its parent.
    Terminated,
}

/// Every state, in lifecycle order.
/// The agent name of `reef run` and `reef chat` sessions: their memory namespace is
/// `agent:main` and session search finds them under this name.
pub const DEFAULT_AGENT: &str = "main";

pub const AGENT_STATES: [AgentState; 6] = [
    AgentState::Pending,
    AgentState::Running,
    AgentState::Paused,
    AgentState::Completed,
    AgentState::Failed,
    AgentState::Terminated,
];

impl AgentState {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::Pending => "pending",
            AgentState::Running => "running",
            AgentState::Paused => "paused",
            AgentState::Completed => "completed",
            AgentState::Failed => "failed",
            AgentState::Terminated => "terminated",
        }
    }

    /// Parses the name `as_str` gives.
    pub fn parse(name: &str) -> Option<AgentState> {
        AGENT_STATES.into_iter().find(|s| s.as_str() == name)
    }

    /// No transition leaves a final state.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            AgentState::Completed | AgentState::Failed | AgentState::Terminated
        )
    }

    /// Whether `self → next` is a transition of the lifecycle:
    /// pending → running | failed | terminated; running → paused | completed | failed |
    /// terminated; paused → running | failed | terminated.
    pub fn can_become(self, next: AgentState) -> bool {
        use AgentState::{Completed, Failed, Paused, Pending, Running, Terminated};
        matches!(
            (self, next),
            (Pending, Running | Failed | Terminated)
                | (Running, Paused | Completed | Failed | Terminated)
                | (Paused, Running | Failed | Terminated)
        )
    }

    /// `next` if the lifecycle allows it, otherwise an error naming both states.
    pub fn transition(self, next: AgentState) -> Result<AgentState, InvalidTransition> {
        if self.can_become(next) {
            Ok(next)
        } else {
            Err(InvalidTransition {
                from: self,
                to: next,
            })
        }
    }
}

impl fmt::Display for AgentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A transition the lifecycle does not have; the caller asked for something the agent's
/// current state does not allow (e.g. resuming a terminated agent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("an agent cannot go from {from} to {to}")]
pub struct InvalidTransition {
    pub from: AgentState,
    pub to: AgentState,
}

/// Limits that stop a runaway agent. `None` means no limit of that kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Input + output tokens over the agent's life.
    #[serde(default)]
    pub tokens: Option<u64>,
    /// Money over the agent's life, in millionths of a US dollar.
    #[serde(default)]
    pub cost_micros: Option<u64>,
    /// Model rounds per turn.
    #[serde(default)]
    pub rounds: Option<u32>,
    /// Wall-clock seconds per turn.
    #[serde(default)]
    pub wall_secs: Option<u64>,
}

impl Budget {
    /// Ok when no limit of `self` is wider than `parent`'s (a limit of `parent` must also be
    /// set in `self`); otherwise the first offending field, for an error message.
    pub fn within(&self, parent: &Budget) -> Result<(), String> {
        fn check<T: PartialOrd + fmt::Display + Copy>(
            name: &str,
            child: Option<T>,
            parent: Option<T>,
        ) -> Result<(), String> {
            match (child, parent) {
                (_, None) => Ok(()),
                (None, Some(p)) => Err(format!(
                    "budget.{name} is unlimited but the parent's is {p}"
                )),
                (Some(c), Some(p)) if c > p => {
                    Err(format!("budget.{name} = {c} exceeds the parent's {p}"))
                }
                _ => Ok(()),
            }
        }
        check("tokens", self.tokens, parent.tokens)?;
        check("cost_micros", self.cost_micros, parent.cost_micros)?;
        check("rounds", self.rounds, parent.rounds)?;
        check("wall_secs", self.wall_secs, parent.wall_secs)
    }

    /// `self` with every limit clamped to `parent`'s, so the result is always `within` it.
    pub fn clamped_to(&self, parent: &Budget) -> Budget {
        fn clamp<T: Ord + Copy>(child: Option<T>, parent: Option<T>) -> Option<T> {
            match (child, parent) {
                (Some(c), Some(p)) => Some(c.min(p)),
                (c, None) => c,
                (None, p) => p,
            }
        }
        Budget {
            tokens: clamp(self.tokens, parent.tokens),
            cost_micros: clamp(self.cost_micros, parent.cost_micros),
            rounds: clamp(self.rounds, parent.rounds),
            wall_secs: clamp(self.wall_secs, parent.wall_secs),
        }
    }
}

/// What happens to a message that arrives for an agent while it is in the middle of a turn
/// (`daemon.queue_mode`, overridable per template).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueMode {
    /// It waits and runs as the next turn.
    #[default]
    Followup,
    /// It is added to the running turn at the next round boundary, as a user message.
    Steer,
    /// Everything that waits is merged into one next turn.
    Collect,
}

impl QueueMode {
    pub const ALL: [QueueMode; 3] = [QueueMode::Followup, QueueMode::Steer, QueueMode::Collect];

    pub fn as_str(self) -> &'static str {
        match self {
            QueueMode::Followup => "followup",
            QueueMode::Steer => "steer",
            QueueMode::Collect => "collect",
        }
    }

    pub fn parse(s: &str) -> Option<QueueMode> {
        QueueMode::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lifecycle_has_exactly_these_transitions() {
        use AgentState::*;
        let allowed = [
            (Pending, Running),
            (Pending, Failed),
            (Pending, Terminated),
            (Running, Paused),
            (Running, Completed),
            (Running, Failed),
            (Running, Terminated),
            (Paused, Running),
            (Paused, Failed),
            (Paused, Terminated),
        ];
        for from in AGENT_STATES {
            for to in AGENT_STATES {
                let expected = allowed.contains(&(from, to));
                assert_eq!(from.can_become(to), expected, "{from} -> {to}");
                assert_eq!(from.transition(to).is_ok(), expected, "{from} -> {to}");
            }
            if from.is_final() {
                assert!(AGENT_STATES.iter().all(|to| !from.can_become(*to)));
            }
            assert_eq!(AgentState::parse(from.as_str()), Some(from));
        }
        let err = Terminated.transition(Running).unwrap_err();
        assert_eq!(
            err.to_string(),
            "an agent cannot go from terminated to running"
        );
        assert_eq!(AgentState::parse("sleeping"), None);
    }

    #[test]
    fn a_child_budget_is_never_wider_than_its_parent() {
        let parent = Budget {
            tokens: Some(1000),
            rounds: Some(10),
            ..Budget::default()
        };
        let ok = Budget {
            tokens: Some(500),
            rounds: Some(10),
            wall_secs: Some(60),
            ..Budget::default()
        };
        assert_eq!(ok.within(&parent), Ok(()));
        let too_many = Budget {
            tokens: Some(5000),
            rounds: Some(3),
            ..Budget::default()
        };
        assert_eq!(
            too_many.within(&parent),
            Err("budget.tokens = 5000 exceeds the parent's 1000".into())
        );
        let unlimited = Budget {
            tokens: Some(10),
            ..Budget::default()
        };
        assert!(
            unlimited
                .within(&parent)
                .unwrap_err()
                .contains("rounds is unlimited")
        );
        let clamped = too_many.clamped_to(&parent);
        assert_eq!(
            clamped,
            Budget {
                tokens: Some(1000),
                rounds: Some(3),
                ..Budget::default()
            }
        );
        assert_eq!(clamped.within(&parent), Ok(()));
        assert_eq!(
            Budget::default().clamped_to(&parent).within(&parent),
            Ok(())
        );
    }
}
