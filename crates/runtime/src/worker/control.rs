//! Operator commands a worker runs between turns: compacting the agent's session now, and
//! replacing it with a fresh one (notes and long-term memory stay).

use super::{Worker, record};
use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_agent::NOTHING_TO_COMPACT;
use reef_core::{EventMsg, Op, SessionId};
use serde_json::json;
use tokio::sync::oneshot;

/// A command for an agent's worker, with where its answer goes.
pub(crate) enum Control {
    /// Compact now; answered with the `ContextCompacted` event, or a `Conflict` saying why
    /// there was nothing to compact.
    Compact(oneshot::Sender<Result<EventMsg, RuntimeError>>),
    /// Start a new session; answered with its id.
    Reset(oneshot::Sender<Result<SessionId, RuntimeError>>),
}

impl Worker {
    pub(super) async fn control(&mut self, command: Control) {
        match command {
            Control::Compact(reply) => {
                let result = self.compact().await;
                if reply.send(result).is_err() {
                    tracing::debug!(agent = %self.agent, "nobody waited for the compaction");
                }
            }
            Control::Reset(reply) => {
                let result = self.reset().await;
                if reply.send(result).is_err() {
                    tracing::debug!(agent = %self.agent, "nobody waited for the reset");
                }
            }
        }
    }

    async fn compact(&mut self) -> Result<EventMsg, RuntimeError> {
        // A compaction may warn before it ends (a summary that fell back to truncation): only
        // the compaction itself, "nothing to compact" or an error answer.
        let msg = self
            .ask(Op::Compact, |m| match m {
                EventMsg::ContextCompacted { .. } | EventMsg::Error { .. } => true,
                EventMsg::Warning { message } => message.starts_with(NOTHING_TO_COMPACT),
                _ => false,
            })
            .await?;
        match msg {
            EventMsg::ContextCompacted { .. } => Ok(msg),
            EventMsg::Warning { message } => Err(RuntimeError::Conflict(message)),
            EventMsg::Error { message } => Err(RuntimeError::Setup(message)),
            other => Err(RuntimeError::Setup(format!("unexpected answer {other:?}"))),
        }
    }

    async fn reset(&mut self) -> Result<SessionId, RuntimeError> {
        let msg = self
            .ask(Op::NewSession, |m| {
                matches!(
                    m,
                    EventMsg::SessionConfigured { .. } | EventMsg::Error { .. }
                )
            })
            .await?;
        let EventMsg::SessionConfigured { session_id, .. } = msg else {
            return Err(RuntimeError::Setup(format!(
                "cannot start a new session: {msg:?}"
            )));
        };
        let rt = Runtime::from_weak(&self.inner)?;
        rt.store()
            .set_agent_session(&self.agent, &session_id)
            .await?;
        record::event(
            &rt,
            &self.agent,
            "session.reset",
            json!({"session": session_id}),
        )
        .await;
        Ok(session_id)
    }

    /// Opens the session if needed, submits `op` and records the events it causes until
    /// one matches `answer`, which is returned.
    async fn ask(
        &mut self,
        op: Op,
        answer: impl Fn(&EventMsg) -> bool,
    ) -> Result<EventMsg, RuntimeError> {
        let rt = Runtime::from_weak(&self.inner)?;
        let record = rt
            .store()
            .get_agent(&self.agent)
            .await?
            .ok_or_else(|| RuntimeError::NotFound(format!("agent {} is gone", self.agent)))?;
        self.prepare(&rt, &record).await?;
        let Some(handle) = self.handle.as_mut() else {
            return Err(RuntimeError::ShuttingDown);
        };
        let id = handle.submit(op);
        while let Some(event) = handle.next_event().await {
            let done = event.id == id && answer(&event.msg);
            let msg = event.msg.clone();
            record::session_event(&rt, &self.agent, (&[], &[]), event).await;
            if done {
                return Ok(msg);
            }
        }
        self.handle = None;
        Err(RuntimeError::Setup("the agent's session ended".into()))
    }
}
