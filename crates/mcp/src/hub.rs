//! The servers of one reef process: each started on first use, shared by every agent that
//! has it, its tool list kept until the server says it changed, restarted after a crash with
//! a growing delay, and stopped with reef.

use crate::error::McpError;
use crate::launch::redact;
use crate::launch::{Launcher, Live};
use crate::names::{ToolList, offer};
use crate::types::{CallResult, PromptInfo, PromptMessages, ResourceContents, ResourceInfo};
use reef_config::{McpConfig, McpServerConfig, McpTransport};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The first delay before a failed server is started again; it doubles with each failure
/// in a row, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The MCP servers of this reef process.
pub struct McpHub {
    max_tools: usize,
    launcher: Launcher,
    slots: BTreeMap<String, Slot>,
}

struct Slot {
    config: McpServerConfig,
    state: Mutex<SlotState>,
    /// Held while the server starts, so agents asking at once start it once.
    starting: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct SlotState {
    live: Option<Arc<Live>>,
    /// Tools offered when last listed (kept for the status after the server stops).
    tool_count: Option<usize>,
    last_error: Option<String>,
    /// Failures in a row (a start that failed, a session that ended); reset by an answer.
    failures: u32,
    retry_at: Option<Instant>,
    starts: u32,
    stopped: bool,
}

/// Whether a request waits out a failed server's delay before starting it again.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Patience {
    /// Listing tools at the start of a turn: a server in its delay is left out at once.
    None,
    /// A call: waits when the delay is shorter than the server's timeout.
    UpToTimeout,
}

/// What `reef mcp list` shows of a server.
#[derive(Clone, Debug, Serialize)]
pub struct ServerStatus {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// `disabled`, `idle` (not started yet), `running`, `failed` or `stopped`.
    pub state: &'static str,
    pub tools: Option<usize>,
    pub last_error: Option<String>,
    pub starts: u32,
    pub pid: Option<u32>,
    /// Progress notifications received from the running server.
    pub progress: u64,
    /// What the last listing left out or renamed (tools without a usable schema, names
    /// taken, tools beyond the cap).
    pub warnings: Vec<String>,
    pub templates: Option<Vec<String>>,
}

impl McpHub {
    pub fn new(config: &McpConfig, launcher: Launcher) -> Self {
        let slots = config
            .servers
            .iter()
            .map(|(name, server)| {
                let slot = Slot {
                    config: server.clone(),
                    state: Mutex::default(),
                    starting: tokio::sync::Mutex::new(()),
                };
                (name.clone(), slot)
            })
            .collect();
        Self {
            max_tools: config.max_tools_per_server,
            launcher,
            slots,
        }
    }

    /// The configured servers agents of `template` get, by name.
    pub fn servers_for(&self, template: &str) -> Vec<String> {
        self.slots
            .values()
            .filter(|s| s.config.offered_to(template))
            .map(|s| s.config.name.clone())
            .collect()
    }

    /// Every configured server's name.
    pub fn names(&self) -> Vec<String> {
        self.slots.keys().cloned().collect()
    }

    /// The server's tools, starting it if needed (but not waiting out the delay after a
    /// failure); listed again when it said they changed.
    pub async fn tools(&self, server: &str) -> Result<Arc<ToolList>, McpError> {
        let slot = self.slot(server)?;
        let live = self.live(slot, Patience::None).await?;
        let changed = live.signals.take_tools_changed();
        let cached = lock(&live.tools).clone();
        if !changed && let Some(tools) = cached {
            return Ok(tools);
        }
        let listed = self
            .guard(slot, &live, live.conn.list_tools(self.max_tools))
            .await;
        let (listed, total, mut warnings) = match listed {
            Ok(listed) => listed,
            Err(err) => {
                if changed {
                    // Not listed after all: list again next time.
                    live.signals.note_tools_changed();
                }
                return Err(err);
            }
        };
        let (tools, more) = offer(server, listed, total, self.max_tools);
        warnings.extend(more);
        for warning in &warnings {
            tracing::warn!(server, "{}", live.process.redact(warning));
        }
        let list = Arc::new(ToolList { tools, warnings });
        *lock(&live.tools) = Some(list.clone());
        lock(&slot.state).tool_count = Some(list.tools.len());
        Ok(list)
    }

    /// Calls the server's tool `tool` (its own name, not the prefixed one).
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        args: Map<String, Value>,
    ) -> Result<CallResult, McpError> {
        let slot = self.slot(server)?;
        let live = self.live(slot, Patience::UpToTimeout).await?;
        self.guard(slot, &live, live.conn.call_tool(tool, args))
            .await
    }

    pub async fn list_resources(&self, server: &str) -> Result<Vec<ResourceInfo>, McpError> {
        let slot = self.slot(server)?;
        let live = self.live(slot, Patience::UpToTimeout).await?;
        self.guard(slot, &live, live.conn.list_resources()).await
    }

    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
    ) -> Result<Vec<ResourceContents>, McpError> {
        let slot = self.slot(server)?;
        let live = self.live(slot, Patience::UpToTimeout).await?;
        self.guard(slot, &live, live.conn.read_resource(uri)).await
    }

    pub async fn list_prompts(&self, server: &str) -> Result<Vec<PromptInfo>, McpError> {
        let slot = self.slot(server)?;
        let live = self.live(slot, Patience::UpToTimeout).await?;
        self.guard(slot, &live, live.conn.list_prompts()).await
    }

    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        args: Map<String, Value>,
    ) -> Result<PromptMessages, McpError> {
        let slot = self.slot(server)?;
        let live = self.live(slot, Patience::UpToTimeout).await?;
        self.guard(slot, &live, live.conn.get_prompt(name, args))
            .await
    }

    /// `text` (something the server said, or an error about it) with the values of the
    /// secrets the server is given replaced by their names.
    pub fn redact(&self, server: &str, text: &str) -> String {
        let Some(slot) = self.slots.get(server) else {
            return text.to_owned();
        };
        let live = lock(&slot.state).live.clone();
        let text = match live {
            Some(live) => live.process.redact(text),
            None => text.to_owned(),
        };
        redact(&text, &self.launcher.secret_values(&slot.config))
    }

    /// Every configured server's state.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.slots
            .values()
            .map(|slot| {
                let state = lock(&slot.state);
                let running = state.live.as_ref().filter(|l| !l.conn.is_closed());
                ServerStatus {
                    name: slot.config.name.clone(),
                    transport: match slot.config.transport {
                        McpTransport::Stdio { .. } => "stdio",
                        McpTransport::Http { .. } => "http",
                    },
                    state: if !slot.config.enabled {
                        "disabled"
                    } else if state.stopped {
                        "stopped"
                    } else if running.is_some() {
                        "running"
                    } else if state.last_error.is_some() {
                        "failed"
                    } else {
                        "idle"
                    },
                    tools: state.tool_count,
                    last_error: state.last_error.clone(),
                    starts: state.starts,
                    pid: running.and_then(|l| l.process.pid()),
                    progress: running.map_or(0, |l| l.signals.progress_count()),
                    warnings: running
                        .and_then(|l| lock(&l.tools).as_ref().map(|t| t.warnings.clone()))
                        .unwrap_or_default(),
                    templates: slot.config.templates.clone(),
                }
            })
            .collect()
    }

    /// Stops every server; later requests fail.
    pub async fn shutdown(&self) {
        for slot in self.slots.values() {
            let live = {
                let mut state = lock(&slot.state);
                state.stopped = true;
                state.live.take()
            };
            if let Some(live) = live {
                live.stop().await;
            }
        }
    }

    fn slot(&self, server: &str) -> Result<&Slot, McpError> {
        let slot = self
            .slots
            .get(server)
            .ok_or_else(|| McpError::UnknownServer(server.to_owned()))?;
        if !slot.config.enabled {
            return Err(McpError::Disabled(server.to_owned()));
        }
        Ok(slot)
    }

    /// The running server, started now if it is not. After a failure the server waits out
    /// its delay first: a call waits when the delay is shorter than its timeout, a listing
    /// never does. Requests that queued behind a start that failed get its error.
    async fn live(&self, slot: &Slot, patience: Patience) -> Result<Arc<Live>, McpError> {
        if let Some(live) = self.running(slot)? {
            return Ok(live);
        }
        let attempts = lock(&slot.state).starts;
        let _starting = slot.starting.lock().await;
        if let Some(live) = self.running(slot)? {
            return Ok(live);
        }
        let name = &slot.config.name;
        let (wait, last_error, tried_meanwhile) = {
            let state = lock(&slot.state);
            let wait = state
                .retry_at
                .map(|at| at.saturating_duration_since(Instant::now()))
                .unwrap_or_default();
            (wait, state.last_error.clone(), state.starts != attempts)
        };
        let timeout = Duration::from_secs(slot.config.timeout_secs);
        let patient = patience == Patience::UpToTimeout && wait <= timeout && !tried_meanwhile;
        if !wait.is_zero() && !patient {
            return Err(McpError::Backoff {
                server: name.clone(),
                reason: last_error.unwrap_or_default(),
                retry_in_secs: wait.as_secs().max(1),
            });
        }
        tokio::time::sleep(wait).await;
        lock(&slot.state).starts += 1;
        match self.launcher.start(&slot.config).await {
            Ok(live) => {
                let live = Arc::new(live);
                let stopped = {
                    let mut state = lock(&slot.state);
                    if !state.stopped {
                        state.live = Some(live.clone());
                    }
                    state.stopped
                };
                if stopped {
                    live.stop().await;
                    return Err(McpError::Closed {
                        server: name.clone(),
                        reason: "reef is stopping".into(),
                    });
                }
                tracing::info!(server = %name, pid = ?live.process.pid(), "MCP server started");
                Ok(live)
            }
            Err(err) => {
                let reason = redact(&err.to_string(), &self.launcher.secret_values(&slot.config));
                self.failed(slot, reason);
                Err(err)
            }
        }
    }

    /// The live session, if there is one still open. A closed one is put away as a failure.
    fn running(&self, slot: &Slot) -> Result<Option<Arc<Live>>, McpError> {
        let live = {
            let state = lock(&slot.state);
            if state.stopped {
                return Err(McpError::Closed {
                    server: slot.config.name.clone(),
                    reason: "reef is stopping".into(),
                });
            }
            state.live.clone()
        };
        match live {
            Some(live) if !live.conn.is_closed() => Ok(Some(live)),
            Some(live) => {
                self.gone(slot, &live, "the connection closed");
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Runs one request; when the connection turns out to be gone, the server is put away
    /// (with why) so the next request starts it again.
    async fn guard<T>(
        &self,
        slot: &Slot,
        live: &Arc<Live>,
        request: impl Future<Output = Result<T, McpError>>,
    ) -> Result<T, McpError> {
        match request.await {
            Ok(value) => {
                lock(&slot.state).failures = 0;
                Ok(value)
            }
            Err(err) if err.is_fatal_to_connection() || live.conn.is_closed() => {
                live.process.settle().await;
                let why = self.gone(slot, live, &live.process.redact(&err.to_string()));
                Err(match err {
                    McpError::Closed { server, .. } => McpError::Closed {
                        server,
                        reason: why,
                    },
                    other => other,
                })
            }
            Err(err) => Err(err),
        }
    }

    /// Puts away a session that ended, recording why (once, by whoever removes it); returns
    /// that reason.
    fn gone(&self, slot: &Slot, live: &Arc<Live>, what: &str) -> String {
        let reason = match live.process.exit_report() {
            Some(report) => format!("{what}: {report}"),
            None => what.to_owned(),
        };
        let removed = {
            let mut state = lock(&slot.state);
            let current = state.live.as_ref().is_some_and(|l| Arc::ptr_eq(l, live));
            if current {
                state.live = None;
            }
            current
        };
        live.process.kill();
        if removed {
            tracing::warn!(server = %slot.config.name, "MCP server stopped: {reason}");
            self.failed(slot, reason.clone());
        }
        reason
    }

    fn failed(&self, slot: &Slot, reason: String) {
        let mut state = lock(&slot.state);
        state.failures += 1;
        let delay = FIRST_BACKOFF
            .saturating_mul(1 << (state.failures - 1).min(6))
            .min(MAX_BACKOFF);
        state.retry_at = Some(Instant::now() + delay);
        state.last_error = Some(reason);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
