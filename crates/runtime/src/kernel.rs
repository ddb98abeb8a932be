//! The `Runtime`: the daemon's kernel. It owns the store, the bus, the turn limit, the
//! scheduler and one worker task per agent that has work; everything the HTTP API and the agents' own tools
//! do goes through its methods.

use crate::bus::Bus;
use crate::error::RuntimeError;
use crate::templates::Templates;
use crate::worker::{self, WorkerHandle};
use reef_agent::{HelperCommand, SandboxPolicy};
use reef_config::Config;
use reef_core::{AgentId, ModelClient};
use reef_security::CommandRules;
use reef_store::{AgentRecord, Store};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

/// What the daemon is started with.
pub struct RuntimeOptions {
    pub config: Config,
    pub templates: Templates,
    /// The process that applies the kernel sandbox (`reef sandbox-exec`).
    pub helper: Option<HelperCommand>,
    /// Serve every agent with this model instead of the configured providers (benchmarks).
    pub model_override: Option<Arc<dyn ModelClient>>,
    /// The clock routines fire by; `None` is the system's (tests pass a `ManualClock`).
    pub clock: Option<Arc<dyn reef_schedule::Clock>>,
}

/// A handle to the running daemon kernel; cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub config: Config,
    pub templates: Templates,
    pub store: Store,
    /// Long-term memory (with the configured embedder, loaded on first use), shared by agents.
    pub memory: reef_store::Memory,
    pub bus: Bus,
    pub turns: Arc<Semaphore>,
    pub rules: CommandRules,
    pub policy: SandboxPolicy,
    pub sandbox_warning: Option<String>,
    pub model_override: Option<Arc<dyn ModelClient>>,
    pub models: Mutex<HashMap<String, Arc<dyn ModelClient>>>,
    pub workers: Mutex<HashMap<AgentId, WorkerHandle>>,
    pub shutdown: watch::Sender<bool>,
    pub in_flight: crate::questions::InFlight,
    pub background: Mutex<Vec<JoinHandle<()>>>,
    /// Events that could not be written to the history (logged when it happened).
    pub lost_events: AtomicU64,
    pub debuggers: crate::debug::Debuggers,
    pub started: std::time::Instant,
    pub channels: crate::channels::Board,
    pub scheduler: crate::scheduler::Handle,
    /// The WASM engine every agent's WASM skills run on (made on first use).
    pub wasm: Arc<reef_skills::WasmRuntime>,
    /// The configured MCP servers, started when an agent first uses them; `None` when there
    /// are none.
    pub mcp: Option<Arc<reef_mcp::McpHub>>,
    /// What each agent is doing now, and the text streaming in.
    pub activity: crate::activity::Board,
    /// Counters for `/metrics`.
    pub meter: crate::metrics::Meter,
    /// Agents' protocol events as they happen.
    pub live: crate::live::Live,
    /// This node of the cluster, in cluster mode.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
}

/// What a start found and repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Inbox messages a previous process had claimed and not finished; they run again.
    pub released: u64,
    /// Agents woken because their inbox had work.
    pub woken: usize,
}

impl Runtime {
    /// Opens the store, puts messages a killed process had claimed back in their inboxes,
    /// checks the sandbox once, starts the bus and the expiry task, and wakes every running
    /// agent with work.
    ///
    /// In cluster mode the store is PostgreSQL, the node joins the cluster under its name, and
    /// it runs only the agents it holds leases on; what a node that died was doing is put back
    /// when another takes its agents over, not at start.
    pub async fn start(opts: RuntimeOptions) -> Result<(Runtime, Recovery), RuntimeError> {
        let (store, cluster) = match &opts.config.cluster {
            Some(config) => {
                let password = config.database_password.as_ref().map(|p| p.expose());
                let store =
                    Store::connect_postgres(&config.database_url, password, &opts.config.home)
                        .await?;
                let pg = store
                    .postgres()
                    .cloned()
                    .ok_or_else(|| RuntimeError::Setup("cluster mode without PostgreSQL".into()))?;
                let cluster = crate::cluster::Cluster::join(pg, config).await?;
                (store, Some(Arc::new(cluster)))
            }
            None => (Store::open(&opts.config.store_path)?, None),
        };
        let released = match cluster {
            Some(_) => 0,
            None => store.release_claimed().await?,
        };
        let after = store.last_event_seq().await?;
        let (policy, sandbox_warning) = reef_agent::sandbox_policy(&opts.config, opts.helper)
            .await
            .map_err(|e| RuntimeError::Setup(e.to_string()))?;
        let rules = match &opts.config.approvals.dangerous {
            Some(dangerous) => CommandRules::new(dangerous, &opts.config.approvals.allow),
            None => CommandRules::new(
                reef_security::DEFAULT_DANGEROUS,
                &opts
                    .config
                    .approvals
                    .allow
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            ),
        }
        .map_err(|message| RuntimeError::invalid("approvals", message))?;
        let mcp = reef_agent::mcp_hub(&opts.config, policy.clone());
        let (bus, pump) = Bus::start(store.clone(), after, cluster.clone());
        let (shutdown, _) = watch::channel(false);
        let runtime = Runtime {
            inner: Arc::new(Inner {
                turns: Arc::new(Semaphore::new(opts.config.daemon.max_concurrent_turns)),
                memory: reef_agent::memory(&opts.config, store.clone()).embedded_in_background(),
                wasm: Arc::new(reef_skills::WasmRuntime::new(
                    opts.config.home.join("cache").join("wasm"),
                )),
                mcp,
                activity: crate::activity::Board::default(),
                meter: crate::metrics::Meter::default(),
                config: opts.config,
                templates: opts.templates,
                store,
                bus,
                rules,
                policy,
                sandbox_warning,
                model_override: opts.model_override,
                models: Mutex::new(HashMap::new()),
                workers: Mutex::new(HashMap::new()),
                shutdown,
                in_flight: crate::questions::InFlight::default(),
                background: Mutex::new(vec![pump]),
                lost_events: AtomicU64::new(0),
                live: crate::live::Live::default(),
                debuggers: crate::debug::Debuggers::default(),
                started: std::time::Instant::now(),
                channels: crate::channels::Board::default(),
                cluster,
                scheduler: crate::scheduler::Handle::new(
                    opts.clock
                        .unwrap_or_else(|| Arc::new(reef_schedule::SystemClock)),
                ),
            }),
        };
        runtime.cancel_stale_breakpoints().await?;
        runtime.audit_configuration().await?;
        let expiry = tokio::spawn(crate::expiry::run(Arc::downgrade(&runtime.inner)));
        lock(&runtime.inner.background).push(expiry);
        let backfill = tokio::spawn(crate::backfill::run(Arc::downgrade(&runtime.inner)));
        lock(&runtime.inner.background).push(backfill);
        if released > 0 {
            runtime
                .inner
                .store
                .append_event(
                    "daemon.recovered",
                    None,
                    serde_json::json!({"released": released}),
                )
                .await?;
        }
        let mut woken = 0;
        for agent in runtime.inner.store.list_agents().await? {
            // A routine run's agent: its job says whether it is still wanted. One whose run
            // ended (timed out, cancelled) before it could be destroyed goes now; one spawned
            // and not yet given its task is left to the scheduler.
            let run = if agent.ephemeral {
                runtime.inner.store.last_job_of_agent(&agent.name).await?
            } else {
                None
            };
            if let Some(job) = &run {
                if job.state.is_final() {
                    runtime.destroy_agent(&agent.name, false).await?;
                    continue;
                }
                if job.state == reef_store::JobState::Pending {
                    continue;
                }
            }
            if agent.state == reef_core::AgentState::Running
                && !runtime
                    .inner
                    .store
                    .inbox(&agent.id, reef_store::InboxStatus::Pending)
                    .await?
                    .is_empty()
            {
                runtime.wake(&agent.id);
                woken += 1;
            } else if agent.ephemeral && agent.state == reef_core::AgentState::Running {
                // Its task was done when the last process stopped, before it was destroyed.
                worker::reap_if_done(&runtime, &agent).await?;
            }
        }
        runtime.reconcile_routines().await?;
        // Event routines go on from where the last process stopped reading the history.
        let cursor = runtime
            .inner
            .store
            .scheduler_cursor()
            .await?
            .unwrap_or(after);
        let scheduler = tokio::spawn(crate::scheduler::run(
            Arc::downgrade(&runtime.inner),
            cursor,
        ));
        lock(&runtime.inner.background).push(scheduler);
        if runtime.inner.cluster.is_some() {
            let loops = crate::cluster::start(&runtime.inner);
            lock(&runtime.inner.background).extend(loops);
        }
        runtime.inner.bus.poke();
        Ok((runtime, Recovery { released, woken }))
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub fn bus(&self) -> &Bus {
        &self.inner.bus
    }

    /// Agents' protocol events as their sessions report them, streamed text included, from
    /// now on (see [`crate::LiveEvent`]).
    pub fn live_events(&self) -> tokio::sync::broadcast::Receiver<crate::LiveEvent> {
        self.inner.live.subscribe()
    }

    /// Long-term memory, as agents use it (same embedder and ranking).
    pub fn memory(&self) -> &reef_store::Memory {
        &self.inner.memory
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub fn templates(&self) -> &Templates {
        &self.inner.templates
    }

    /// Changes to `true` when the daemon starts shutting down (long-lived streams end then).
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.inner.shutdown.subscribe()
    }

    /// The warning shown when tools run without the kernel sandbox, if they do.
    pub fn sandbox_warning(&self) -> Option<&str> {
        self.inner.sandbox_warning.as_deref()
    }

    /// Paths agents' tools never see (secrets, keys, the home), as the file tools hide them.
    pub fn hidden_paths(&self) -> Vec<PathBuf> {
        self.inner.policy.hidden_paths()
    }

    /// Where an agent's directories live: `$REEF_HOME/agents/<name>`.
    pub fn agent_dir(&self, name: &str) -> PathBuf {
        self.inner.config.home.join("agents").join(name)
    }

    /// Stops every worker: running turns are interrupted and their messages go back to the
    /// inbox (they run again at the next start; the transcript keeps what was done), then
    /// the background tasks end.
    pub async fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
        let workers: Vec<WorkerHandle> =
            lock(&self.inner.workers).drain().map(|(_, w)| w).collect();
        for worker in workers {
            worker.stop();
            crate::workers::join_worker(worker).await;
        }
        // Their messages are back in the inboxes: the other nodes take the agents now.
        self.leave_cluster().await;
        if let Err(err) = self
            .inner
            .store
            .append_event("daemon.stopped", None, serde_json::json!({}))
            .await
        {
            self.inner.lost_events.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %err, "cannot record the daemon's stop");
        }
        if let Some(hub) = &self.inner.mcp {
            hub.shutdown().await;
        }
        self.inner.bus.poke();
        // Let the pump publish the last events before it is stopped.
        tokio::task::yield_now().await;
        for task in lock(&self.inner.background).drain(..) {
            task.abort();
        }
    }

    /// How long ago the daemon started.
    pub fn uptime(&self) -> std::time::Duration {
        self.inner.started.elapsed()
    }

    /// Events that could not be written to the history since the daemon started.
    pub fn lost_events(&self) -> u64 {
        self.inner.lost_events.load(Ordering::Relaxed)
    }

    pub(crate) async fn agent(&self, name_or_id: &str) -> Result<AgentRecord, RuntimeError> {
        let store = &self.inner.store;
        let found = match store.agent_by_name(name_or_id).await? {
            Some(agent) => Some(agent),
            None if name_or_id.starts_with("agt_") => {
                store.get_agent(&AgentId::from(name_or_id)).await?
            }
            None => None,
        };
        found.ok_or_else(|| {
            RuntimeError::NotFound(format!(
                "no agent named `{name_or_id}`; `reef agent list` shows them"
            ))
        })
    }

    pub(crate) fn from_weak(weak: &Weak<Inner>) -> Result<Runtime, RuntimeError> {
        weak.upgrade()
            .map(|inner| Runtime { inner })
            .ok_or(RuntimeError::ShuttingDown)
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
