//! Cluster mode: this node's membership (its name, and the agents it holds leases on), the
//! loop that heartbeats, claims agents and takes over those of nodes that stopped, and the
//! notifications nodes send each other over NATS (wake an agent, new events). Everything a
//! notification says is also in PostgreSQL, so a node that misses one (NATS down) finds the
//! work on its next tick: slower, never lost.

use crate::kernel::{Inner, Runtime, lock};
use reef_config::ClusterConfig;
use reef_core::AgentId;
use reef_store::{ClusterNode, PgError, PgStore};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;

/// The subject a node publishes an agent's id on when that agent has work.
const WAKE: &str = "reef.wake";
/// The subject a node publishes on when it appended events.
const EVENTS: &str = "reef.events";
/// The subject a node publishes on when it handed agents over: every node claims now.
const CLAIM: &str = "reef.claim";

/// Longest pause between two rounds of heartbeating and claiming.
const MAX_TICK: Duration = Duration::from_secs(1);

/// This node of the cluster.
pub(crate) struct Cluster {
    pg: PgStore,
    node: ClusterNode,
    nats: async_nats::Client,
    tick: Duration,
    /// The agents this node holds leases on: the only ones it runs.
    owned: Mutex<HashSet<AgentId>>,
    /// Set to run a round of claiming now (an agent somewhere has work nobody runs).
    claim_now: Notify,
    /// Whether NATS is connected (otherwise the nodes find work by polling).
    connected: Arc<AtomicBool>,
}

/// Why a node cannot join the cluster.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error(transparent)]
    Database(#[from] PgError),
    /// NATS cannot be reached at start; the node does not run without it.
    #[error("cannot reach NATS at {url} (cluster.nats_url): {message}")]
    Bus { url: String, message: String },
}

impl Cluster {
    /// Joins as `config.node_name` (refused while a live node has the name) and connects to
    /// NATS.
    pub(crate) async fn join(pg: PgStore, config: &ClusterConfig) -> Result<Cluster, JoinError> {
        let connected = Arc::new(AtomicBool::new(true));
        let flag = Arc::clone(&connected);
        let url = config.nats_url.clone();
        let nats = async_nats::ConnectOptions::new()
            .name(format!("reef {}", config.node_name))
            .event_callback(move |event| {
                let (flag, url) = (Arc::clone(&flag), url.clone());
                async move {
                    match event {
                        async_nats::Event::Connected => {
                            tracing::info!(url = %url, "NATS is back: nodes notify each other again");
                            flag.store(true, Ordering::Relaxed);
                        }
                        async_nats::Event::Disconnected => {
                            tracing::warn!(
                                url = %url,
                                "lost NATS: nodes poll the database for work until it is back"
                            );
                            flag.store(false, Ordering::Relaxed);
                        }
                        _ => {}
                    }
                }
            })
            .connection_timeout(Duration::from_secs(5))
            .connect(config.nats_url.as_str())
            .await
            .map_err(|e| JoinError::Bus {
                url: config.nats_url.clone(),
                message: e.to_string(),
            })?;
        let node = pg
            .join_cluster(&config.node_name, config.lease, config.max_agents)
            .await?;
        Ok(Cluster {
            pg,
            node,
            nats,
            tick: (config.lease / 5).clamp(Duration::from_millis(100), MAX_TICK),
            owned: Mutex::default(),
            claim_now: Notify::new(),
            connected,
        })
    }

    /// How often the node heartbeats, claims and polls.
    pub(crate) fn tick(&self) -> Duration {
        self.tick
    }

    /// This node's name.
    pub(crate) fn name(&self) -> &str {
        self.node.name()
    }

    /// Whether this node runs `agent`.
    pub(crate) fn owns(&self, agent: &AgentId) -> bool {
        lock(&self.owned).contains(agent)
    }

    /// Tells every node that `agent` has work: its owner wakes it; with no owner, every
    /// node claims at once.
    pub(crate) fn announce_work(&self, agent: &AgentId) {
        self.publish(WAKE, agent.to_string().into_bytes());
    }

    /// Tells every node that events were appended (their buses read the history).
    pub(crate) fn announce_events(&self) {
        self.publish(EVENTS, Vec::new());
    }

    /// Publishes in the background; a notification lost is found by the next tick's poll.
    fn publish(&self, subject: &'static str, payload: Vec<u8>) {
        let nats = self.nats.clone();
        tokio::spawn(async move {
            if let Err(err) = nats.publish(subject, payload.into()).await {
                tracing::debug!(error = %err, subject, "cannot notify the other nodes over NATS");
            }
        });
    }

    /// Whether nodes reach each other over NATS right now.
    pub(crate) fn bus_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
}

/// Starts the node's loops: heartbeating and claiming, and listening to the other nodes.
pub(crate) fn start(inner: &Arc<Inner>) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(leases(Arc::downgrade(inner))),
        tokio::spawn(listen(Arc::downgrade(inner))),
    ]
}

/// Every tick: renews this node's leases (stopping the agents it lost), claims its share of
/// the agents nobody runs (putting back what their last node was doing, as a start after a
/// crash does), and wakes its agents that have work.
async fn leases(weak: Weak<Inner>) {
    loop {
        let Ok(runtime) = Runtime::from_weak(&weak) else {
            return;
        };
        let Some(cluster) = runtime.inner.cluster.clone() else {
            return;
        };
        if *runtime.inner.shutdown.borrow() {
            return;
        }
        if let Err(err) = round(&runtime, &cluster).await {
            match err {
                PgError::Superseded { .. } => {
                    tracing::error!(error = %err, "this node lost its name: its agents stop");
                    let lost: Vec<AgentId> = lock(&cluster.owned).drain().collect();
                    for agent in lost {
                        runtime.stop_worker(&agent).await;
                    }
                    return;
                }
                other => {
                    tracing::warn!(error = %other, "cluster round failed; retrying");
                }
            }
        }
        let tick = cluster.tick;
        drop(runtime);
        tokio::select! {
            () = tokio::time::sleep(tick) => {}
            () = cluster.claim_now.notified() => {}
        }
    }
}

async fn round(runtime: &Runtime, cluster: &Cluster) -> Result<(), PgError> {
    let held: HashSet<AgentId> = cluster
        .pg
        .heartbeat(
            &cluster.node,
            cluster.bus_connected(),
            runtime.bus().read_through(),
        )
        .await?
        .into_iter()
        .collect();
    let lost: Vec<AgentId> = {
        let mut owned = lock(&cluster.owned);
        let lost = owned.difference(&held).cloned().collect();
        owned.retain(|agent| held.contains(agent));
        lost
    };
    for agent in lost {
        tracing::warn!(agent = %agent, "this node's lease on the agent ended: it stops here");
        runtime.stop_worker(&agent).await;
    }
    if cluster.pg.draining(&cluster.node).await? {
        drain(runtime, cluster).await?;
        return Ok(());
    }
    let excess = cluster.pg.excess_agents(&cluster.node).await?;
    if excess > 0 {
        rebalance(runtime, cluster, excess).await?;
    }
    for lease in cluster.pg.claim_agents(&cluster.node).await? {
        // What its last node had claimed and not finished runs again here.
        let released = match runtime.store().release_claimed_of(&lease.agent).await {
            Ok(n) => n,
            Err(err) => {
                tracing::warn!(agent = %lease.agent, error = %err, "cannot take over an agent's messages");
                continue;
            }
        };
        lock(&cluster.owned).insert(lease.agent.clone());
        let data = serde_json::json!({
            "node": cluster.name(),
            "epoch": lease.epoch,
            "released": released,
        });
        if let Err(err) = runtime
            .record_event("agent.placed", Some(&lease.agent), data)
            .await
        {
            tracing::warn!(error = %err, "cannot record an agent's placement");
        }
    }
    // Work that arrived while a notification was lost, or before this node held the agent.
    let owned: Vec<AgentId> = lock(&cluster.owned).iter().cloned().collect();
    match runtime.store().inbox_depths().await {
        Ok(depths) => {
            for (agent, _) in depths.into_iter().filter(|(a, _)| owned.contains(a)) {
                runtime.wake(&agent);
            }
        }
        Err(err) => tracing::warn!(error = %err, "cannot read the inboxes"),
    }
    Ok(())
}

/// Hands every agent this node runs to the others (`reef cluster drain`): its turns end and
/// their messages go back, then its leases go and the other nodes are told to claim.
async fn drain(runtime: &Runtime, cluster: &Cluster) -> Result<(), PgError> {
    let held: Vec<AgentId> = lock(&cluster.owned).iter().cloned().collect();
    if held.is_empty() {
        return Ok(());
    }
    tracing::info!(
        agents = held.len(),
        "draining: handing this node's agents over"
    );
    for agent in &held {
        runtime.stop_worker(agent).await;
    }
    let released = cluster.pg.release_agents(&cluster.node).await?;
    lock(&cluster.owned).clear();
    if released > 0 {
        cluster.publish(CLAIM, Vec::new());
    }
    Ok(())
}

/// Hands `excess` agents to the other nodes (one joined, so this node's share shrank): idle
/// ones first, each once its worker has stopped.
async fn rebalance(runtime: &Runtime, cluster: &Cluster, excess: i64) -> Result<(), PgError> {
    let mut held: Vec<AgentId> = lock(&cluster.owned).iter().cloned().collect();
    {
        let workers = lock(&runtime.inner.workers);
        // Agents with no worker, then the rest; each group in a stable order.
        held.sort_by_key(|agent| (workers.contains_key(agent), agent.clone()));
    }
    let count = usize::try_from(excess).unwrap_or(usize::MAX);
    let mut released = 0;
    for agent in held.into_iter().take(count) {
        runtime.stop_worker(&agent).await;
        lock(&cluster.owned).remove(&agent);
        if cluster.pg.release_agent(&cluster.node, &agent).await? {
            released += 1;
        }
    }
    tracing::info!(released, "handed agents to a node that joined");
    if released > 0 {
        cluster.publish(CLAIM, Vec::new());
    }
    Ok(())
}

/// Reacts to the other nodes' notifications: wakes an agent this node runs, claims now when
/// an agent with work has no node, and has the bus read new events.
async fn listen(weak: Weak<Inner>) {
    let Some(cluster) = weak.upgrade().and_then(|inner| inner.cluster.clone()) else {
        return;
    };
    let mut wakes = match cluster.nats.subscribe(WAKE).await {
        Ok(sub) => sub,
        Err(err) => {
            tracing::warn!(error = %err, "cannot subscribe to NATS; polling the database");
            return;
        }
    };
    let mut events = match cluster.nats.subscribe(EVENTS).await {
        Ok(sub) => sub,
        Err(err) => {
            tracing::warn!(error = %err, "cannot subscribe to NATS; polling the database");
            return;
        }
    };
    let mut claims = match cluster.nats.subscribe(CLAIM).await {
        Ok(sub) => sub,
        Err(err) => {
            tracing::warn!(error = %err, "cannot subscribe to NATS; polling the database");
            return;
        }
    };
    loop {
        use futures::StreamExt as _;
        tokio::select! {
            Some(message) = wakes.next() => {
                let Ok(runtime) = Runtime::from_weak(&weak) else { return };
                let agent = AgentId::from_string(String::from_utf8_lossy(&message.payload).into_owned());
                if cluster.owns(&agent) {
                    runtime.wake(&agent);
                } else {
                    cluster.claim_now.notify_one();
                }
            }
            Some(_) = events.next() => {
                let Ok(runtime) = Runtime::from_weak(&weak) else { return };
                runtime.inner.bus.poke_local();
            }
            Some(_) = claims.next() => cluster.claim_now.notify_one(),
            else => return,
        }
    }
}

impl Runtime {
    /// Hands this node's agents to the other nodes (its workers have stopped), so they take
    /// them without waiting for the leases to expire.
    pub(crate) async fn leave_cluster(&self) {
        let Some(cluster) = &self.inner.cluster else {
            return;
        };
        match cluster.pg.release_agents(&cluster.node).await {
            Ok(n) => {
                tracing::info!(agents = n, "handed this node's agents over");
                lock(&cluster.owned).clear();
                // The other nodes claim at once rather than at their next tick.
                let told = async {
                    cluster.nats.publish(CLAIM, Vec::new().into()).await?;
                    cluster.nats.flush().await.map_err(|e| e.to_string())?;
                    Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
                };
                if n > 0
                    && let Err(err) = told.await
                {
                    tracing::debug!(error = %err, "cannot tell the other nodes; they claim at their next tick");
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot hand the agents over; their leases expire instead")
            }
        }
        if let Err(err) = cluster.pg.leave_cluster(&cluster.node).await {
            tracing::warn!(error = %err, "cannot leave the cluster; the name frees when the lease ends");
        }
    }
}
