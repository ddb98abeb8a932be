//! The operator's side of debugging: setting breakpoints, waiting for a stop, and the
//! commands that decide what a paused turn does next.

use super::stop::{AgentDebugger, Paused};
use super::{Breakpoint, DebugCommand, DebugStatus};
use crate::error::RuntimeError;
use crate::kernel::{Runtime, lock};
use crate::messaging::MAX_MESSAGE_BYTES;
use reef_agent::{Resume, StopAt};
use reef_store::{PendingKind, PendingStatus};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How long `debug_wait` may be asked to wait.
pub const MAX_DEBUG_WAIT: Duration = Duration::from_secs(60);

impl Runtime {
    /// The agent's debugger (created on first use), for its session.
    pub(crate) fn debugger(&self, record: &reef_store::AgentRecord) -> Arc<AgentDebugger> {
        lock(&self.inner.debuggers.0)
            .entry(record.id.clone())
            .or_insert_with(|| {
                Arc::new(AgentDebugger {
                    runtime: Arc::downgrade(&self.inner),
                    agent: record.id.clone(),
                    name: record.name.clone(),
                    state: Mutex::default(),
                    changed: watch::Sender::new(0),
                })
            })
            .clone()
    }

    /// The agent's breakpoints and where it waits.
    pub async fn debug_status(&self, name: &str) -> Result<DebugStatus, RuntimeError> {
        let record = self.agent(name).await?;
        Ok(self.debugger(&record).status(false))
    }

    /// Waits up to `timeout` (at most [`MAX_DEBUG_WAIT`], and no longer than the daemon
    /// runs) for the agent to pause at a breakpoint, and returns its status then.
    pub async fn debug_wait(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<DebugStatus, RuntimeError> {
        let record = self.agent(name).await?;
        let debugger = self.debugger(&record);
        let mut changed = debugger.changed.subscribe();
        let mut stopping = self.stopping();
        let wait = async {
            while lock(&debugger.state).paused.is_none() {
                tokio::select! {
                    seen = changed.changed() => if seen.is_err() { return },
                    _ = stopping.wait_for(|stop| *stop) => return,
                }
            }
        };
        if tokio::time::timeout(timeout.min(MAX_DEBUG_WAIT), wait)
            .await
            .is_err()
        {
            tracing::trace!(agent = %record.name, "no stop within the wait");
        }
        Ok(debugger.status(false))
    }

    /// Replaces the agent's breakpoints; with none, debugging ends: stepping stops and a
    /// paused turn goes on.
    pub async fn debug_set(
        &self,
        name: &str,
        breakpoints: Vec<Breakpoint>,
    ) -> Result<DebugStatus, RuntimeError> {
        let record = self.agent(name).await?;
        let debugger = self.debugger(&record);
        let off = breakpoints.is_empty();
        // One critical section: no `step` can slip between clearing and letting go.
        let (taken, stepping) = {
            let mut state = lock(&debugger.state);
            state.breakpoints = breakpoints.clone();
            let stepping = state.stepping;
            if off {
                state.stepping = false;
                (state.paused.take(), stepping)
            } else {
                (None, stepping)
            }
        };
        crate::worker::record::event(
            self,
            &record.id,
            "debug.breakpoints",
            json!({"breakpoints": breakpoints.iter().map(Breakpoint::spec).collect::<Vec<_>>()}),
        )
        .await;
        if let Some(paused) = taken {
            let resume = Resume::Proceed {
                arguments: paused.edited.as_ref().map(Value::to_string),
            };
            self.resume(&debugger, paused, resume, "continue", stepping)
                .await?;
        }
        Ok(debugger.status(false))
    }

    /// Runs a debug command for the agent paused at a breakpoint: at stop `stop` when given
    /// (a command meant for another stop is refused). An agent that is not paused is a
    /// `Conflict` saying so.
    pub async fn debug_command(
        &self,
        name: &str,
        command: DebugCommand,
        stop: Option<&str>,
    ) -> Result<DebugStatus, RuntimeError> {
        check(&command)?;
        let record = self.agent(name).await?;
        let debugger = self.debugger(&record);
        self.apply(&debugger, stop, command).await
    }

    /// Answers the breakpoint item `id` with a command in its text form. An item no turn
    /// waits at any more (its turn went away) is withdrawn.
    pub(crate) async fn answer_breakpoint(
        &self,
        item: &reef_store::PendingItem,
        text: &str,
    ) -> Result<DebugStatus, RuntimeError> {
        let command = DebugCommand::parse(text)?;
        check(&command)?;
        let debugger = item
            .agent_id
            .as_ref()
            .and_then(|a| self.inner.debuggers.get(a));
        let live = debugger.as_ref().is_some_and(|d| {
            lock(&d.state)
                .paused
                .as_ref()
                .is_some_and(|p| p.id == item.id)
        });
        let Some(debugger) = debugger.filter(|_| live) else {
            if item.status == PendingStatus::Pending {
                let reason = Some("no turn waits at this breakpoint any more".to_owned());
                match self
                    .inner
                    .store
                    .resolve_pending(&item.id, PendingStatus::Cancelled, reason, None)
                    .await
                {
                    Ok(_) | Err(reef_store::StoreError::Conflict(_)) => {}
                    Err(err) => return Err(err.into()),
                }
                self.inner.bus.poke();
            }
            return Err(not_waiting(&item.id));
        };
        self.apply(&debugger, Some(&item.id), command).await
    }

    async fn apply(
        &self,
        debugger: &Arc<AgentDebugger>,
        stop: Option<&str>,
        command: DebugCommand,
    ) -> Result<DebugStatus, RuntimeError> {
        match decide(debugger, stop, command)? {
            Decision::Show(status) => Ok(status),
            Decision::Edited { id, arguments } => {
                crate::worker::record::event(
                    self,
                    &debugger.agent,
                    "debug.edited",
                    json!({"id": id, "arguments": arguments}),
                )
                .await;
                Ok(debugger.status(false))
            }
            Decision::Resume {
                paused,
                resume,
                word,
                stepping,
            } => {
                self.resume(debugger, paused, resume, word, stepping)
                    .await?;
                Ok(debugger.status(false))
            }
        }
    }

    /// Answers the stop's item and lets its turn go on. Runs on its own task, so a caller
    /// that goes away (a client that disconnects) cannot leave the turn without its
    /// decision. When the item cannot be written the stop is put back (with the stepping
    /// it had), unless its turn has gone.
    async fn resume(
        &self,
        debugger: &Arc<AgentDebugger>,
        paused: Paused,
        resume: Resume,
        word: &'static str,
        stepping_before: bool,
    ) -> Result<(), RuntimeError> {
        let rt = self.clone();
        let debugger = debugger.clone();
        let task = tokio::spawn(async move {
            let answer = match (&resume, &paused.edited) {
                (Resume::Skip { error }, _) => format!("skip: {error}"),
                (_, Some(arguments)) => format!("{word} with arguments {arguments}"),
                (_, None) => word.to_owned(),
            };
            let resolved = rt
                .inner
                .store
                .resolve_pending(&paused.id, PendingStatus::Answered, Some(answer), None)
                .await;
            let result = match resolved {
                Ok(_) => {
                    if paused.reply.send(resume).is_err() {
                        tracing::debug!(agent = %debugger.name, "the paused turn was gone");
                    }
                    Ok(())
                }
                // Already withdrawn: its turn went away.
                Err(reef_store::StoreError::Conflict(_) | reef_store::StoreError::NotFound(_)) => {
                    Err(not_waiting(&paused.id))
                }
                Err(err) => {
                    let mut state = lock(&debugger.state);
                    if state.paused.is_none() && !paused.reply.is_closed() {
                        // Still paused: the operator can try again.
                        state.paused = Some(paused);
                        state.stepping = stepping_before;
                    }
                    Err(err.into())
                }
            };
            debugger.bump();
            rt.inner.bus.poke();
            result
        });
        task.await
            .map_err(|e| RuntimeError::Setup(format!("a debug command crashed: {e}")))?
    }

    /// Cancels breakpoint items a previous process left pending: no turn waits at them.
    pub(crate) async fn cancel_stale_breakpoints(&self) -> Result<(), RuntimeError> {
        for item in self
            .inner
            .store
            .list_pending(Some(PendingStatus::Pending))
            .await?
        {
            if item.kind == PendingKind::Breakpoint
                && let Err(err) = self
                    .inner
                    .store
                    .resolve_pending(
                        &item.id,
                        PendingStatus::Cancelled,
                        Some("the daemon restarted; the turn runs again".into()),
                        None,
                    )
                    .await
            {
                // It stays listed; answering it withdraws it then.
                tracing::warn!(id = %item.id, error = %err, "cannot cancel a stale breakpoint");
            }
        }
        Ok(())
    }
}

/// What a command does to a paused agent, decided under its lock.
enum Decision {
    /// Nothing changes; show this.
    Show(DebugStatus),
    /// The call's arguments were replaced; the agent stays paused.
    Edited { id: String, arguments: Value },
    /// The stop is over (taken out of the state): answer it and let the turn go on.
    Resume {
        paused: Paused,
        resume: Resume,
        word: &'static str,
        /// Stepping before the command changed it.
        stepping: bool,
    },
}

fn decide(
    debugger: &AgentDebugger,
    item: Option<&str>,
    command: DebugCommand,
) -> Result<Decision, RuntimeError> {
    let name = &debugger.name;
    let mut state = lock(&debugger.state);
    let Some(paused) = state.paused.as_mut() else {
        return Err(RuntimeError::Conflict(format!(
            "agent {name} is not paused at a breakpoint (`reef agent debug {name} status` \
             shows its breakpoints)"
        )));
    };
    if let Some(id) = item
        && id != paused.id
    {
        return Err(not_waiting(id));
    }
    let tool_call = matches!(paused.stop.at, StopAt::ToolCall(_));
    let word = command.name();
    let stepping = match &command {
        DebugCommand::Step => Some(true),
        DebugCommand::Continue => Some(false),
        _ => None,
    };
    let resume = match command {
        DebugCommand::Inspect => {
            drop(state);
            return Ok(Decision::Show(debugger.status(true)));
        }
        DebugCommand::Edit { arguments } => {
            if !tool_call {
                return Err(not_a_call(name, "edit"));
            }
            if !arguments.is_object() {
                return Err(RuntimeError::invalid(
                    "arguments",
                    format!("must be a JSON object, got {arguments}"),
                ));
            }
            paused.edited = Some(arguments.clone());
            return Ok(Decision::Edited {
                id: paused.id.clone(),
                arguments,
            });
        }
        DebugCommand::Skip { error } if tool_call => Resume::Skip { error },
        DebugCommand::Skip { .. } => return Err(not_a_call(name, "skip")),
        DebugCommand::Step | DebugCommand::Continue => Resume::Proceed {
            arguments: paused.edited.as_ref().map(Value::to_string),
        },
    };
    let Some(paused) = state.paused.take() else {
        return Err(not_waiting(item.unwrap_or("the breakpoint")));
    };
    let before = state.stepping;
    if let Some(stepping) = stepping {
        state.stepping = stepping;
    }
    Ok(Decision::Resume {
        paused,
        resume,
        word,
        stepping: before,
    })
}

fn not_waiting(id: &str) -> RuntimeError {
    RuntimeError::Conflict(format!("no turn waits at breakpoint {id} any more"))
}

fn not_a_call(name: &str, command: &str) -> RuntimeError {
    RuntimeError::invalid(
        "command",
        format!(
            "agent {name} is paused before a model request; only a tool call can be {command}ed"
        ),
    )
}

/// Bounds what a command may put into the transcript.
fn check(command: &DebugCommand) -> Result<(), RuntimeError> {
    match command {
        DebugCommand::Skip { error } => crate::messaging::check_text("error", error),
        DebugCommand::Edit { arguments } if arguments.to_string().len() > MAX_MESSAGE_BYTES => {
            Err(RuntimeError::invalid(
                "arguments",
                format!("longer than {MAX_MESSAGE_BYTES} bytes"),
            ))
        }
        _ => Ok(()),
    }
}
