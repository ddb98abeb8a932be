//! One worker task per agent with work. It wakes when a message arrives, and while the agent
//! is running and its inbox is not empty it claims the oldest message and has the agent's
//! session run a turn for it (holding one of the daemon's turn slots), driving the session
//! through the `Submission`/`Event` protocol like every other front end. Budgets are checked
//! before every turn and enforced inside it; operator commands (compact, reset) are run
//! between turns.

mod assembly;
mod budget;
mod control;
mod outcome;
mod persist;
pub(crate) use outcome::reap_if_done;
pub(crate) mod record;
mod turn;

pub(crate) use assembly::{agent_sandbox, policy_summary, registry_for, skill_folders};
pub(crate) use control::Control;

use crate::error::RuntimeError;
use crate::kernel::{Inner, Runtime};
use crate::tools::AgentCtx;
use assembly::OpenError;
use reef_agent::AgentHandle;
use reef_core::{AgentId, AgentState, EventMsg, Op};
use reef_store::{AgentRecord, InboxMessage};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

/// Attempts at a message whose turn failed (model unreachable after its own retries, store
/// error) before it is given up; between attempts the agent waits 1, 2, 4, … s (at most 60).
const MAX_ATTEMPTS: u32 = 5;

/// Wait before trying again after the store failed (busy, disk full).
const STORE_RETRY: Duration = Duration::from_secs(1);

pub(crate) struct WorkerHandle {
    pub wake: Arc<Notify>,
    stop: watch::Sender<bool>,
    refresh: Arc<AtomicBool>,
    control: mpsc::UnboundedSender<Control>,
    pub task: JoinHandle<()>,
}

impl WorkerHandle {
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    pub fn refresh(&self) {
        self.refresh.store(true, Ordering::SeqCst);
    }

    /// Hands an operator command to the worker; it runs between turns. Gives the command
    /// back when the worker has ended.
    pub fn control(&self, command: Control) -> Result<(), Control> {
        self.control.send(command).map_err(|e| e.0)
    }
}

pub(crate) fn start(inner: Weak<Inner>, agent: AgentId) -> WorkerHandle {
    let wake = Arc::new(Notify::new());
    let (stop, stop_rx) = watch::channel(false);
    let refresh = Arc::new(AtomicBool::new(false));
    let (control, control_rx) = mpsc::unbounded_channel();
    let worker = Worker {
        ctx: Arc::new(AgentCtx {
            runtime: inner.clone(),
            agent: agent.clone(),
            current: Mutex::new(None),
        }),
        inner,
        agent,
        handle: None,
        refresh: refresh.clone(),
        wake: wake.clone(),
    };
    let task = tokio::spawn(run(worker, stop_rx, control_rx));
    WorkerHandle {
        wake,
        stop,
        refresh,
        control,
        task,
    }
}

struct Worker {
    inner: Weak<Inner>,
    agent: AgentId,
    ctx: Arc<AgentCtx>,
    /// The agent's session, running behind its protocol handle once opened.
    handle: Option<AgentHandle>,
    refresh: Arc<AtomicBool>,
    wake: Arc<Notify>,
}

enum Next {
    Idle,
    /// A turn failed and its message went back to the inbox: wait before the next attempt.
    Backoff(Duration),
    Stop,
}

async fn run(
    mut worker: Worker,
    mut stop: watch::Receiver<bool>,
    mut control: mpsc::UnboundedReceiver<Control>,
) {
    loop {
        let delay = match worker.drain(&mut stop).await {
            Next::Stop => break,
            Next::Backoff(delay) => Some(delay),
            Next::Idle => None,
        };
        tokio::select! {
            () = sleep_or_forever(delay) => {}
            () = worker.wake.notified(), if delay.is_none() => {}
            Some(command) = control.recv() => worker.control(command).await,
            _ = stop.changed() => break,
        }
    }
    worker.close().await;
}

async fn sleep_or_forever(delay: Option<Duration>) {
    match delay {
        Some(delay) => tokio::time::sleep(delay).await,
        None => std::future::pending().await,
    }
}

impl Worker {
    /// Runs turns until the inbox is empty or the agent is no longer running.
    async fn drain(&mut self, stop: &mut watch::Receiver<bool>) -> Next {
        loop {
            if *stop.borrow() {
                return Next::Stop;
            }
            let Ok(rt) = Runtime::from_weak(&self.inner) else {
                return Next::Stop;
            };
            let record = match rt.store().get_agent(&self.agent).await {
                Ok(Some(record)) => record,
                Ok(None) => return Next::Stop,
                Err(err) => {
                    tracing::warn!(agent = %self.agent, error = %err, "cannot read the agent");
                    return Next::Backoff(STORE_RETRY);
                }
            };
            if record.state != AgentState::Running {
                return Next::Idle;
            }
            let remaining = match budget::remaining(&rt, &record).await {
                Ok(remaining) => remaining,
                Err(err) => {
                    tracing::warn!(agent = %record.name, error = %err, "cannot read usage");
                    return Next::Backoff(STORE_RETRY);
                }
            };
            if let Some((kind, reason)) = remaining.exhausted(&record) {
                if let Err(err) = outcome::stop_for_budget(&rt, &record, &reason, kind).await {
                    tracing::warn!(agent = %record.name, error = %err, "cannot stop the agent");
                    return Next::Backoff(STORE_RETRY);
                }
                return Next::Idle;
            }
            let turns = rt.inner.turns.clone();
            let permit = tokio::select! {
                permit = turns.acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => return Next::Stop,
                },
                _ = stop.changed() => return Next::Stop,
            };
            let message = match rt.store().claim_next(&record.id).await {
                Ok(Some(message)) => message,
                Ok(None) => return Next::Idle,
                Err(err) => {
                    tracing::warn!(agent = %record.name, error = %err, "cannot claim a message");
                    return Next::Backoff(STORE_RETRY);
                }
            };
            rt.bus().poke();
            let next = match self.prepare(&rt, &record).await {
                Ok(()) => {
                    let settings = assembly::turn_settings(&rt, &record, remaining);
                    self.submit(Op::Configure { settings });
                    self.drive_turn(&rt, &record, message, stop).await
                }
                Err(err) => self.not_prepared(&rt, &record, &message, err).await,
            };
            drop(permit);
            if !matches!(next, Next::Idle) {
                return next;
            }
        }
    }

    /// Opens the session on first use, and switches its model when the agent's changed.
    async fn prepare(&mut self, rt: &Runtime, record: &AgentRecord) -> Result<(), OpenError> {
        let refresh = self.refresh.swap(false, Ordering::SeqCst);
        if self.handle.is_some() {
            if refresh {
                self.submit(Op::SetModel {
                    provider: record.model.clone(),
                });
            }
            return Ok(());
        }
        self.handle = Some(assembly::open(rt, record, self.ctx.clone()).await?);
        Ok(())
    }

    /// The session could not be opened: a store failure waits and tries again; anything
    /// else fails the agent. The message goes back to the inbox either way.
    async fn not_prepared(
        &mut self,
        rt: &Runtime,
        record: &AgentRecord,
        message: &InboxMessage,
        err: OpenError,
    ) -> Next {
        release(rt, record, message).await;
        match err {
            OpenError::Transient(err) => {
                tracing::warn!(agent = %record.name, error = %err, "cannot open the session");
                Next::Backoff(STORE_RETRY)
            }
            OpenError::Fatal(err) => {
                let reason = format!("cannot start a turn: {err}");
                match outcome::fail_agent(rt, record, &reason, message.id).await {
                    Ok(()) => Next::Idle,
                    Err(err) => {
                        tracing::warn!(agent = %record.name, error = %err, "cannot fail the agent");
                        Next::Backoff(STORE_RETRY)
                    }
                }
            }
        }
    }

    fn submit(&self, op: Op) -> Option<reef_core::SubmissionId> {
        self.handle.as_ref().map(|h| h.submit(op))
    }

    /// Ends the session loop, if one runs, reading what it still reports.
    async fn close(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.activity.idle(&self.agent);
        }
        let Some(mut handle) = self.handle.take() else {
            return;
        };
        handle.submit(Op::Shutdown);
        while let Some(event) = handle.next_event().await {
            if matches!(event.msg, EventMsg::ShutdownComplete) {
                break;
            }
        }
        handle.join().await;
    }
}

/// Puts a claimed message back in the inbox, waiting for a store that cannot be reached
/// (`persist::until_stored`).
async fn release(rt: &Runtime, record: &AgentRecord, message: &InboxMessage) {
    persist::until_stored(rt, &record.id, "a message put back in the inbox", || {
        rt.store().release_message(message.id)
    })
    .await;
    rt.bus().poke();
}

impl From<OpenError> for RuntimeError {
    fn from(err: OpenError) -> RuntimeError {
        match err {
            OpenError::Transient(err) | OpenError::Fatal(err) => err,
        }
    }
}
