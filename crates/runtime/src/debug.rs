//! Step-through debugging of daemon agents: the operator's breakpoints per agent, the stop a
//! turn waits at (recorded as a pending item of kind `breakpoint`, so every front end sees
//! it), and the commands that let the turn go on: step, continue, skip, edit, inspect.

use crate::error::RuntimeError;
use crate::kernel::{Inner, Runtime, lock};
use async_trait::async_trait;
use reef_agent::{Debugger, Resume, Stop, StopAt, StopKind};
use reef_core::{AgentId, Message};
use reef_store::{NewPending, PendingKind, PendingStatus};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Where an agent's turns stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Breakpoint {
    /// Before every model request.
    Round,
    /// Before every call of this tool; `None`: of any tool.
    Tool(Option<String>),
}

impl Breakpoint {
    /// Parses `round`, `tool` or `tool=NAME` (the `--break` syntax).
    pub fn parse(spec: &str) -> Result<Breakpoint, RuntimeError> {
        let spec = spec.trim();
        match spec.split_once('=') {
            None if spec == "round" => Ok(Breakpoint::Round),
            None if spec == "tool" => Ok(Breakpoint::Tool(None)),
            Some(("tool", name))
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
            {
                Ok(Breakpoint::Tool(Some(name.to_owned())))
            }
            _ => Err(RuntimeError::invalid(
                "break",
                format!("`{spec}` is not a breakpoint; use `round`, `tool` or `tool=NAME`"),
            )),
        }
    }

    /// The `--break` text of this breakpoint.
    pub fn spec(&self) -> String {
        match self {
            Breakpoint::Round => "round".into(),
            Breakpoint::Tool(None) => "tool".into(),
            Breakpoint::Tool(Some(name)) => format!("tool={name}"),
        }
    }

    fn matches(&self, kind: StopKind<'_>) -> bool {
        match (self, kind) {
            (Breakpoint::Round, StopKind::Round) => true,
            (Breakpoint::Tool(None), StopKind::Tool(_)) => true,
            (Breakpoint::Tool(Some(name)), StopKind::Tool(tool)) => name == tool,
            _ => false,
        }
    }
}

/// What the operator tells an agent paused at a breakpoint.
#[derive(Clone, Debug, PartialEq)]
pub enum DebugCommand {
    /// Take the step and stop again before the next one, of any kind.
    Step,
    /// Take the step and stop only at breakpoints.
    Continue,
    /// Do not run the tool call; the model gets `error` as its result.
    Skip { error: String },
    /// Replace the tool call's arguments (a JSON object); the agent stays paused.
    Edit { arguments: Value },
    /// Show the whole context the next request carries; the agent stays paused.
    Inspect,
}

impl DebugCommand {
    /// Parses the text form: `step`, `continue`, `skip TEXT`, `edit JSON`, `inspect` (the
    /// answer to a breakpoint item, a line of `reef agent debug`).
    pub fn parse(text: &str) -> Result<DebugCommand, RuntimeError> {
        let text = text.trim();
        let (word, rest) = text
            .split_once(char::is_whitespace)
            .map_or((text, ""), |(w, r)| (w, r.trim()));
        let bare = |command: DebugCommand| {
            if rest.is_empty() {
                Ok(command)
            } else {
                Err(RuntimeError::invalid(
                    "command",
                    format!("`{word}` takes no argument"),
                ))
            }
        };
        match word {
            "step" | "s" => bare(DebugCommand::Step),
            "continue" | "c" => bare(DebugCommand::Continue),
            "inspect" | "i" => bare(DebugCommand::Inspect),
            "skip" => {
                if rest.is_empty() {
                    return Err(RuntimeError::invalid(
                        "error",
                        "`skip` needs the error text the model gets instead of the result",
                    ));
                }
                Ok(DebugCommand::Skip {
                    error: rest.to_owned(),
                })
            }
            "edit" => {
                let arguments = serde_json::from_str(rest).map_err(|e| {
                    RuntimeError::invalid(
                        "arguments",
                        format!("`edit` needs the new arguments as a JSON object: {e}"),
                    )
                })?;
                Ok(DebugCommand::Edit { arguments })
            }
            _ => Err(RuntimeError::invalid(
                "command",
                format!(
                    "`{word}` is not a debug command; use step, continue, skip TEXT, \
                     edit JSON or inspect"
                ),
            )),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            DebugCommand::Step => "step",
            DebugCommand::Continue => "continue",
            DebugCommand::Skip { .. } => "skip",
            DebugCommand::Edit { .. } => "edit",
            DebugCommand::Inspect => "inspect",
        }
    }
}

/// An agent's debugging state as the operator sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DebugStatus {
    pub agent: String,
    /// `round`, `tool`, `tool=NAME`.
    pub breakpoints: Vec<String>,
    /// Whether the agent stops before its next step of any kind (after `step`).
    pub stepping: bool,
    /// Where the agent waits, if it does.
    pub paused: Option<PausedView>,
}

/// A stop an agent waits at.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PausedView {
    /// The pending item (`reef questions`).
    pub id: String,
    pub round: u32,
    /// `model_request` or `tool_call`.
    pub at: &'static str,
    pub tool: Option<String>,
    pub call_id: Option<String>,
    /// The call's arguments as they will run (after any edit).
    pub arguments: Option<Value>,
    pub edited: bool,
    pub context_tokens: u64,
    pub window: Option<u64>,
    /// Messages in the context, system prompt included.
    pub context_messages: usize,
    /// The whole context (only for `inspect`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<Vec<Message>>,
}

/// Every agent's debugger, created on first use.
#[derive(Default)]
pub(crate) struct Debuggers(Mutex<HashMap<AgentId, Arc<AgentDebugger>>>);

impl Debuggers {
    fn get(&self, agent: &AgentId) -> Option<Arc<AgentDebugger>> {
        lock(&self.0).get(agent).cloned()
    }

    /// Forgets an agent that is gone.
    pub(crate) fn remove(&self, agent: &AgentId) {
        lock(&self.0).remove(agent);
    }
}

/// One agent's breakpoints and the stop its turn waits at; the session's [`Debugger`].
pub(crate) struct AgentDebugger {
    runtime: Weak<Inner>,
    agent: AgentId,
    name: String,
    state: Mutex<State>,
    /// Bumped whenever the agent pauses or goes on, for those waiting for a pause.
    changed: watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    breakpoints: Vec<Breakpoint>,
    stepping: bool,
    paused: Option<Paused>,
}

struct Paused {
    id: String,
    stop: Stop,
    /// Arguments the operator set (a JSON object).
    edited: Option<Value>,
    reply: oneshot::Sender<Resume>,
}

impl AgentDebugger {
    fn status(&self, with_context: bool) -> DebugStatus {
        let state = lock(&self.state);
        DebugStatus {
            agent: self.name.clone(),
            breakpoints: state.breakpoints.iter().map(Breakpoint::spec).collect(),
            stepping: state.stepping,
            paused: state.paused.as_ref().map(|p| view(p, with_context)),
        }
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

fn view(paused: &Paused, with_context: bool) -> PausedView {
    let (at, call) = match &paused.stop.at {
        StopAt::ModelRequest => ("model_request", None),
        StopAt::ToolCall(call) => ("tool_call", Some(call)),
    };
    let arguments = paused.edited.clone().or_else(|| {
        call.map(|c| {
            serde_json::from_str(&c.arguments).unwrap_or(Value::String(c.arguments.clone()))
        })
    });
    PausedView {
        id: paused.id.clone(),
        round: paused.stop.round,
        at,
        tool: call.map(|c| c.name.clone()),
        call_id: call.map(|c| c.id.to_string()),
        arguments,
        edited: paused.edited.is_some(),
        context_tokens: paused.stop.context_tokens,
        window: paused.stop.window,
        context_messages: paused.stop.context.len(),
        context: with_context.then(|| paused.stop.context.clone()),
    }
}

#[async_trait]
impl Debugger for AgentDebugger {
    fn stops_at(&self, kind: StopKind<'_>) -> bool {
        let state = lock(&self.state);
        state.stepping || state.breakpoints.iter().any(|b| b.matches(kind))
    }

    async fn pause(&self, stop: Stop) -> Resume {
        let go_on = Resume::Proceed { arguments: None };
        let Ok(rt) = Runtime::from_weak(&self.runtime) else {
            return go_on;
        };
        let id = crate::messaging::pending_id(
            "bp",
            reef_core::SubmissionId::new().as_str(),
            &self.agent,
        );
        let (reply, answer) = oneshot::channel();
        let paused = Paused {
            id: id.clone(),
            stop,
            edited: None,
            reply,
        };
        let payload = json!({"agent": self.name, "stop": view(&paused, false)});
        let created = rt
            .store()
            .create_pending(NewPending {
                id: id.clone(),
                kind: PendingKind::Breakpoint,
                agent_id: Some(self.agent.clone()),
                target_id: None,
                payload,
                expires_at: None,
                letter: None,
                followup_request: None,
            })
            .await;
        if let Err(err) = created {
            // A stop nobody can see would hold the agent for good: it goes on.
            tracing::warn!(agent = %self.name, error = %err, "cannot record a breakpoint");
            return go_on;
        }
        lock(&self.state).paused = Some(paused);
        self.bump();
        rt.bus().poke();
        let abandoned = Abandoned {
            debugger: self,
            id: Some(id),
        };
        let resume = answer.await.unwrap_or(go_on);
        abandoned.disarm();
        resume
    }
}

/// Forgets a stop whose turn was interrupted while it waited (the future was dropped): the
/// pending item is cancelled.
struct Abandoned<'a> {
    debugger: &'a AgentDebugger,
    id: Option<String>,
}

impl Abandoned<'_> {
    fn disarm(mut self) {
        self.id = None;
    }
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let mut state = lock(&self.debugger.state);
        if state.paused.as_ref().is_some_and(|p| p.id == id) {
            state.paused = None;
        }
        drop(state);
        self.debugger.bump();
        let Ok(rt) = Runtime::from_weak(&self.debugger.runtime) else {
            return;
        };
        let name = self.debugger.name.clone();
        tokio::spawn(async move {
            let reason = Some("the turn ended while it waited (interrupted or stopped)".into());
            if let Err(err) = rt
                .store()
                .resolve_pending(&id, PendingStatus::Cancelled, reason, None)
                .await
            {
                tracing::warn!(agent = %name, error = %err, "cannot cancel a breakpoint");
            }
            rt.bus().poke();
        });
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakpoints_parse_and_print_back() {
        for spec in ["round", "tool", "tool=shell", "tool=read_file"] {
            assert_eq!(Breakpoint::parse(spec).unwrap().spec(), spec);
        }
        for bad in ["", "rounds", "tool=", "tool=a b", "shell", "tool=x=y"] {
            let err = Breakpoint::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with("break: "), "{bad}: {err}");
        }
    }

    #[test]
    fn commands_parse_with_their_arguments() {
        assert_eq!(DebugCommand::parse(" step ").unwrap(), DebugCommand::Step);
        assert_eq!(DebugCommand::parse("c").unwrap(), DebugCommand::Continue);
        assert_eq!(
            DebugCommand::parse("skip not now, please").unwrap(),
            DebugCommand::Skip {
                error: "not now, please".into()
            }
        );
        assert_eq!(
            DebugCommand::parse(r#"edit {"command": "ls -la"}"#).unwrap(),
            DebugCommand::Edit {
                arguments: json!({"command": "ls -la"})
            }
        );
        for (bad, field) in [
            ("skip", "error"),
            ("edit ls", "arguments"),
            ("step now", "command"),
            ("jump", "command"),
        ] {
            let err = DebugCommand::parse(bad).unwrap_err();
            assert!(
                matches!(&err, RuntimeError::Invalid { field: f, .. } if f == field),
                "{bad}: {err}"
            );
        }
    }
}
