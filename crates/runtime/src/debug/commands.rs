//! The operator's side of debugging: setting breakpoints, waiting for a stop, and the
//! commands that decide what a paused turn does next.

use super::stop::{AgentDebugger, Paused};
use super::{Breakpoint, DebugCommand, DebugStatus};
use crate::error::RuntimeError;
use crate::kernel::{Runtime, lock};
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

    /// Waits up to `timeout` (at most [`MAX_DEBUG_WAIT`]) for the agent to pause at a
    /// breakpoint, and returns its status then.
    pub async fn debug_wait(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<DebugStatus, RuntimeError> {
        let record = self.agent(name).await?;
        let debugger = self.debugger(&record);
        let mut changed = debugger.changed.subscribe();
        let wait = async {
            while lock(&debugger.state).paused.is_none() {
                if changed.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(timeout.min(MAX_DEBUG_WAIT), wait).await;
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
        {
            let mut state = lock(&debugger.state);
            state.breakpoints = breakpoints.clone();
            if off {
                state.stepping = false;
            }
        }
        crate::worker::record::event(
            self,
            &record.id,
            "debug.breakpoints",
            json!({"breakpoints": breakpoints.iter().map(Breakpoint::spec).collect::<Vec<_>>()}),
        )
        .await;
        if off && lock(&debugger.state).paused.is_some() {
            self.apply(&debugger, None, DebugCommand::Continue).await?;
        }
        Ok(debugger.status(false))
    }

    /// Runs a debug command for the agent paused at a breakpoint. An agent that is not
    /// paused is a `Conflict` saying so.
    pub async fn debug_command(
        &self,
        name: &str,
        command: DebugCommand,
    ) -> Result<DebugStatus, RuntimeError> {
        let record = self.agent(name).await?;
        let debugger = self.debugger(&record);
        self.apply(&debugger, None, command).await
    }

    /// Answers the breakpoint item `id` with a command in its text form.
    pub(crate) async fn answer_breakpoint(
        &self,
        item: &reef_store::PendingItem,
        text: &str,
    ) -> Result<DebugStatus, RuntimeError> {
        let command = DebugCommand::parse(text)?;
        let Some(debugger) = item
            .agent_id
            .as_ref()
            .and_then(|a| self.inner.debuggers.get(a))
        else {
            return Err(not_waiting(&item.id));
        };
        self.apply(&debugger, Some(&item.id), command).await
    }

    async fn apply(
        &self,
        debugger: &AgentDebugger,
        item: Option<&str>,
        command: DebugCommand,
    ) -> Result<DebugStatus, RuntimeError> {
        let (paused, resume, word) = match decide(debugger, item, command)? {
            Decision::Show(status) => return Ok(status),
            Decision::Edited { id, arguments } => {
                crate::worker::record::event(
                    self,
                    &debugger.agent,
                    "debug.edited",
                    json!({"id": id, "arguments": arguments}),
                )
                .await;
                return Ok(debugger.status(false));
            }
            Decision::Resume {
                paused,
                resume,
                word,
            } => (paused, resume, word),
        };
        let answer = match (&resume, &paused.edited) {
            (Resume::Skip { error }, _) => format!("skip: {error}"),
            (_, Some(arguments)) => format!("{word} with arguments {arguments}"),
            (_, None) => word.to_owned(),
        };
        let resolved = self
            .inner
            .store
            .resolve_pending(&paused.id, PendingStatus::Answered, Some(answer), None)
            .await;
        if let Err(err) = resolved {
            // Still paused: the operator can try again.
            lock(&debugger.state).paused = Some(paused);
            return Err(err.into());
        }
        if paused.reply.send(resume).is_err() {
            tracing::debug!(agent = %debugger.name, "the paused turn was gone");
        }
        debugger.bump();
        self.inner.bus.poke();
        Ok(debugger.status(false))
    }

    /// Cancels breakpoint items a previous process left pending: no turn waits at them.
    pub(crate) async fn cancel_stale_breakpoints(&self) -> Result<(), RuntimeError> {
        for item in self
            .inner
            .store
            .list_pending(Some(PendingStatus::Pending))
            .await?
        {
            if item.kind == PendingKind::Breakpoint {
                self.inner
                    .store
                    .resolve_pending(
                        &item.id,
                        PendingStatus::Cancelled,
                        Some("the daemon restarted; the turn runs again".into()),
                        None,
                    )
                    .await?;
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
    if let Some(stepping) = stepping {
        state.stepping = stepping;
    }
    Ok(Decision::Resume {
        paused,
        resume,
        word,
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
