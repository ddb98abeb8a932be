//! What each agent is doing this moment (thinking, running a tool, idle) and the model text
//! streaming in, for live views. Nothing here is kept: the event history has what happened,
//! this only says what is happening, and it starts empty after a restart.

use reef_core::{AgentId, EventMsg};
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::broadcast;

/// Changes buffered per subscriber before it starts missing them (a missed text piece is
/// only cosmetic: the complete message follows as an event).
const BUFFER: usize = 1024;

/// What an agent is doing now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Doing {
    /// No turn is running.
    #[default]
    Idle,
    /// A turn is running and the model has the floor.
    Thinking,
    /// A turn is running a tool.
    Tool { name: String },
}

impl Doing {
    /// A short description for people ("idle", "thinking", "running shell").
    pub fn describe(&self) -> String {
        match self {
            Doing::Idle => "idle".to_owned(),
            Doing::Thinking => "thinking".to_owned(),
            Doing::Tool { name } => format!("running {name}"),
        }
    }
}

/// One change of an agent's activity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The agent is now doing this.
    Doing(Doing),
    /// A piece of the model's text, as it streams in.
    Text(String),
    /// The text streamed since the last complete message belonged to an attempt that failed
    /// and is being retried: drop it.
    TextDiscarded,
}

/// A change, and whose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activity {
    pub agent: AgentId,
    pub change: Change,
}

/// Every agent's current activity, and the live feed of changes.
pub(crate) struct Board {
    now: Mutex<HashMap<AgentId, Doing>>,
    tx: broadcast::Sender<Activity>,
}

impl Default for Board {
    fn default() -> Self {
        Board {
            now: Mutex::default(),
            tx: broadcast::channel(BUFFER).0,
        }
    }
}

impl Board {
    /// Notes what a session just reported for `agent`.
    pub(crate) fn observe(&self, agent: &AgentId, msg: &EventMsg) {
        let change = match msg {
            EventMsg::TurnStarted { .. } | EventMsg::ToolCallEnd { .. } => {
                Change::Doing(Doing::Thinking)
            }
            EventMsg::ToolCallBegin { name, .. } => {
                Change::Doing(Doing::Tool { name: name.clone() })
            }
            EventMsg::TurnEnded { .. } | EventMsg::ShutdownComplete => Change::Doing(Doing::Idle),
            EventMsg::ModelDelta { text } => Change::Text(text.clone()),
            EventMsg::ModelRetry { .. } => Change::TextDiscarded,
            _ => return,
        };
        if let Change::Doing(doing) = &change {
            let mut now = self
                .now
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if now.get(agent) == Some(doing) {
                return;
            }
            if *doing == Doing::Idle {
                now.remove(agent);
            } else {
                now.insert(agent.clone(), doing.clone());
            }
        }
        let activity = Activity {
            agent: agent.clone(),
            change,
        };
        if self.tx.send(activity).is_err() {
            // No subscriber is not an error: nobody is watching.
            tracing::trace!("no one watches agent activity");
        }
    }

    /// Notes that `agent`'s worker stopped.
    pub(crate) fn idle(&self, agent: &AgentId) {
        self.observe(agent, &EventMsg::ShutdownComplete);
    }

    fn doing(&self, agent: &AgentId) -> Doing {
        self.now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(agent)
            .cloned()
            .unwrap_or_default()
    }
}

impl crate::kernel::Runtime {
    /// What `agent` is doing now.
    pub fn doing(&self, agent: &AgentId) -> Doing {
        self.inner.activity.doing(agent)
    }

    /// Live activity changes from now on: what agents start doing and the model text as it
    /// streams.
    pub fn watch_activity(&self) -> broadcast::Receiver<Activity> {
        self.inner.activity.tx.subscribe()
    }
}
