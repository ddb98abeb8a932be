//! The debugger of one agent's session: whether its turn stops before a step, and the stop
//! itself (a `breakpoint` pending item, the context kept for `inspect`, and the channel the
//! operator's decision comes back on).

use super::{Breakpoint, DebugStatus, PausedView};
use crate::kernel::{Inner, Runtime, lock};
use async_trait::async_trait;
use reef_agent::{Debugger, Resume, Stop, StopAt, StopKind};
use reef_core::AgentId;
use reef_store::{NewPending, PendingKind, PendingStatus};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::{oneshot, watch};

/// Every agent's debugger, created on first use.
#[derive(Default)]
pub(crate) struct Debuggers(pub(super) Mutex<HashMap<AgentId, Arc<AgentDebugger>>>);

impl Debuggers {
    pub(super) fn get(&self, agent: &AgentId) -> Option<Arc<AgentDebugger>> {
        lock(&self.0).get(agent).cloned()
    }

    /// Forgets an agent that is gone.
    pub(crate) fn remove(&self, agent: &AgentId) {
        lock(&self.0).remove(agent);
    }
}

/// One agent's breakpoints and the stop its turn waits at; the session's [`Debugger`].
pub(crate) struct AgentDebugger {
    pub(super) runtime: Weak<Inner>,
    pub(super) agent: AgentId,
    pub(super) name: String,
    pub(super) state: Mutex<State>,
    /// Bumped whenever the agent pauses or goes on, for those waiting for a pause.
    pub(super) changed: watch::Sender<u64>,
}

#[derive(Default)]
pub(super) struct State {
    pub breakpoints: Vec<Breakpoint>,
    pub stepping: bool,
    pub paused: Option<Paused>,
}

pub(super) struct Paused {
    pub id: String,
    pub stop: Stop,
    /// Arguments the operator set (a JSON object).
    pub edited: Option<Value>,
    pub reply: oneshot::Sender<Resume>,
}

impl AgentDebugger {
    pub(super) fn status(&self, with_context: bool) -> DebugStatus {
        let state = lock(&self.state);
        DebugStatus {
            agent: self.name.clone(),
            breakpoints: state.breakpoints.iter().map(Breakpoint::spec).collect(),
            stepping: state.stepping,
            paused: state.paused.as_ref().map(|p| view(p, with_context)),
        }
    }

    pub(super) fn bump(&self) {
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
        let go_on = || Resume::Proceed { arguments: None };
        let Ok(rt) = Runtime::from_weak(&self.runtime) else {
            return go_on();
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
        // Armed before the item is written: a turn dropped meanwhile still withdraws it.
        let mut abandoned = Abandoned {
            debugger: self,
            id: Some(id.clone()),
            reason: "the turn ended while it waited (interrupted or stopped)",
        };
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
            rt.inner.lost_events.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(agent = %self.name, error = %err, "cannot record a breakpoint; the turn goes on");
            abandoned.disarm();
            return go_on();
        }
        {
            let mut state = lock(&self.state);
            if !state.wants(&paused.stop.at) {
                // Debugging was turned off while the stop was being recorded.
                abandoned.reason = "debugging was turned off";
                return go_on();
            }
            state.paused = Some(paused);
        }
        self.bump();
        rt.bus().poke();
        // Nothing keeps the daemon alive while the turn waits.
        drop(rt);
        let resume = answer.await;
        abandoned.disarm();
        resume.unwrap_or_else(|_| {
            tracing::warn!(agent = %self.name, "a stop ended without a decision; the turn goes on");
            go_on()
        })
    }
}

impl State {
    /// Whether a stop before `at` is still wanted.
    fn wants(&self, at: &StopAt) -> bool {
        let kind = match at {
            StopAt::ModelRequest => StopKind::Round,
            StopAt::ToolCall(call) => StopKind::Tool(&call.name),
        };
        self.stepping || self.breakpoints.iter().any(|b| b.matches(kind))
    }
}

/// Withdraws a stop whose turn was interrupted while it waited (the future was dropped), or
/// that is no longer wanted: the pending item is cancelled with `reason`.
struct Abandoned<'a> {
    debugger: &'a AgentDebugger,
    id: Option<String>,
    reason: &'static str,
}

impl Abandoned<'_> {
    fn disarm(&mut self) {
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
        let (Ok(rt), Ok(tokio)) = (
            Runtime::from_weak(&self.debugger.runtime),
            tokio::runtime::Handle::try_current(),
        ) else {
            // The daemon is gone: its next start cancels the item.
            return;
        };
        let name = self.debugger.name.clone();
        let reason = Some(self.reason.to_owned());
        tokio.spawn(async move {
            match rt
                .store()
                .resolve_pending(&id, PendingStatus::Cancelled, reason, None)
                .await
            {
                Ok(_) | Err(reef_store::StoreError::Conflict(_)) => {}
                Err(err) => {
                    tracing::warn!(agent = %name, error = %err, "cannot cancel a breakpoint");
                }
            }
            rt.bus().poke();
        });
    }
}
