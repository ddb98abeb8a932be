//! The event bus: every event is first committed to the store's history (in the same
//! transaction as the change it describes), then published to live subscribers in `seq`
//! order by one pump task that tails the history. A subscriber that falls behind misses
//! live events but can always re-read them from the history by position.

use reef_core::AgentId;
use reef_store::{Store, StoredEvent};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{Notify, broadcast};

/// Live events buffered per subscriber before it starts missing them.
const LIVE_BUFFER: usize = 4096;

/// Which events a subscriber wants.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only this agent's events.
    pub agent: Option<AgentId>,
    /// Only kinds starting with one of these (`agent.`, `question.`); empty = all.
    pub kinds: Vec<String>,
}

impl EventFilter {
    pub fn matches(&self, event: &StoredEvent) -> bool {
        self.agent
            .as_ref()
            .is_none_or(|a| event.agent_id.as_ref() == Some(a))
            && (self.kinds.is_empty() || self.kinds.iter().any(|k| event.kind.starts_with(k)))
    }
}

/// Publishes the store's new events to subscribers.
#[derive(Clone)]
pub struct Bus {
    tx: broadcast::Sender<StoredEvent>,
    poke: Arc<Notify>,
    /// The last event of the history the pump has read.
    read: Arc<AtomicU64>,
    /// In cluster mode, the other nodes, told when this one appends events.
    cluster: Option<Arc<crate::cluster::Cluster>>,
}

impl Bus {
    /// A bus over `store`, publishing events after `after` (the history's current end). In
    /// cluster mode it also reads the history every `poll`, for events other nodes appended
    /// while their notifications could not arrive.
    pub(crate) fn start(
        store: Store,
        after: u64,
        cluster: Option<Arc<crate::cluster::Cluster>>,
    ) -> (Bus, tokio::task::JoinHandle<()>) {
        let (tx, _) = broadcast::channel(LIVE_BUFFER);
        let poke = Arc::new(Notify::new());
        let poll = cluster.as_ref().map(|c| c.tick());
        let read = Arc::new(AtomicU64::new(after));
        let bus = Bus {
            tx: tx.clone(),
            poke: poke.clone(),
            read: Arc::clone(&read),
            cluster,
        };
        let task = tokio::spawn(pump(store, tx, poke, read, poll));
        (bus, task)
    }

    /// Tells the pump (and, in cluster mode, the other nodes') new events were committed.
    pub(crate) fn poke(&self) {
        self.poke.notify_one();
        if let Some(cluster) = &self.cluster {
            cluster.announce_events();
        }
    }

    /// Tells this node's pump alone (another node appended events).
    pub(crate) fn poke_local(&self) {
        self.poke.notify_one();
    }

    /// The last event of the history published so far (what `reef cluster status` compares
    /// with the history's end as the bus's lag).
    pub(crate) fn read_through(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// Live events from now on (filter them with [`EventFilter::matches`]).
    pub fn subscribe(&self) -> broadcast::Receiver<StoredEvent> {
        self.tx.subscribe()
    }
}

async fn pump(
    store: Store,
    tx: broadcast::Sender<StoredEvent>,
    poke: Arc<Notify>,
    read: Arc<AtomicU64>,
    poll: Option<std::time::Duration>,
) {
    let mut after = read.load(Ordering::Relaxed);
    loop {
        match poll {
            Some(poll) => {
                // Whichever comes first; a missed notification costs one `poll`.
                if tokio::time::timeout(poll, poke.notified()).await.is_err() {
                    tracing::trace!("reading the history on the poll");
                }
            }
            None => poke.notified().await,
        }
        loop {
            let batch = match store.events_after(after, None, 512).await {
                Ok(batch) => batch,
                Err(err) => {
                    tracing::warn!(error = %err, "the event bus cannot read the history");
                    break;
                }
            };
            let Some(last) = batch.last() else {
                break;
            };
            after = last.seq;
            for event in batch {
                // No subscriber is not an error: the history keeps the event.
                if tx.send(event).is_err() {
                    tracing::trace!("no subscriber for an event");
                }
            }
            read.store(after, Ordering::Relaxed);
        }
    }
}

impl crate::kernel::Runtime {
    /// Appends an event to the history (about `agent` when given) and lets subscribers know.
    pub async fn record_event(
        &self,
        kind: &str,
        agent: Option<&reef_core::AgentId>,
        data: serde_json::Value,
    ) -> Result<StoredEvent, crate::RuntimeError> {
        let event = self.store().append_event(kind, agent, data).await?;
        self.bus().poke();
        Ok(event)
    }
}
