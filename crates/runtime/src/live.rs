//! The live feed of agents' protocol events, as their sessions report them (streamed text
//! included), each with the inbox messages its turn answers: what a remote conversation
//! shows while an agent works. Nothing here is durable (the event history is the record);
//! a subscriber that falls behind is told so and misses events, and nothing is cloned while
//! nobody listens.

use reef_core::{AgentId, Event};
use tokio::sync::broadcast;

/// Events buffered per subscriber before it starts missing them.
const BUFFER: usize = 4096;

/// One protocol event of one agent's session.
#[derive(Clone, Debug)]
pub struct LiveEvent {
    pub agent: AgentId,
    /// The inbox messages the turn that reported it works on (empty for events outside a
    /// turn on inbox messages, such as an operator's compaction).
    pub inbox_ids: Vec<u64>,
    pub event: Event,
}

/// The feed's sending side.
pub(crate) struct Live {
    tx: broadcast::Sender<LiveEvent>,
}

impl Default for Live {
    fn default() -> Live {
        Live {
            tx: broadcast::channel(BUFFER).0,
        }
    }
}

impl Live {
    /// Publishes `event` when someone listens.
    pub(crate) fn publish(&self, agent: &AgentId, inbox_ids: &[u64], event: &Event) {
        if self.tx.receiver_count() > 0 {
            // A send only fails when the last receiver just went away: nothing to tell.
            let _unheard = self.tx.send(LiveEvent {
                agent: agent.clone(),
                inbox_ids: inbox_ids.to_vec(),
                event: event.clone(),
            });
        }
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<LiveEvent> {
        self.tx.subscribe()
    }
}
