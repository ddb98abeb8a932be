//! Jobs at run time: cancelling one (a spawned run's agent is destroyed; a turn is interrupted
//! and its message taken out of the inbox unread), and failing stuck ones: a turn whose agent
//! has recorded nothing for `jobs.stuck_after` is interrupted the same way, with the reason.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_core::AgentId;
use reef_store::{JobRecord, JobState};
use serde_json::json;

impl Runtime {
    /// Ends an open job as `state` with `reason` and stops its work: a spawned run's agent is
    /// destroyed (its transcript kept); a turn is interrupted and its message dropped.
    pub(crate) async fn stop_job(
        &self,
        job: &JobRecord,
        state: JobState,
        reason: &str,
    ) -> Result<(), RuntimeError> {
        // Is a turn working on its message now? Only then is that turn interrupted.
        let working = match (job.inbox_id, &job.agent_id, job.deadline_ms) {
            (Some(inbox), Some(agent), None) => self
                .store()
                .inbox(
                    &AgentId::from(agent.as_str()),
                    reef_store::InboxStatus::Processing,
                )
                .await?
                .iter()
                .any(|m| m.id == inbox),
            _ => false,
        };
        // The job ends and its message leaves the inbox together: a worker woken meanwhile
        // cannot take the message up again, and a kill leaves both or neither.
        let ended = self
            .store()
            .stop_job_and_message(job.id, state, reason)
            .await?;
        if ended.is_none() {
            return Ok(());
        }
        if job.deadline_ms.is_some() {
            if let Some(agent) = &job.agent_name {
                match self.destroy_agent(agent, false).await {
                    Ok(()) | Err(RuntimeError::NotFound(_)) => {}
                    Err(err) => return Err(err),
                }
            }
        } else if let (Some(inbox), Some(agent)) = (job.inbox_id, &job.agent_id) {
            let agent = AgentId::from(agent.as_str());
            // A turn working on it is interrupted; its message is already done, so nothing
            // goes back to the inbox.
            if working {
                self.stop_worker(&agent).await;
            }
            tracing::debug!(job = job.id, inbox, "job stopped");
            self.wake(&agent);
        }
        self.bus().poke();
        Ok(())
    }

    /// Fails every job stuck since `stuck_after` ago; returns how many.
    pub(crate) async fn fail_stuck_jobs(&self) -> Result<usize, RuntimeError> {
        let after = self.config().jobs.stuck_after;
        let cutoff = reef_store::timestamp_ago(after);
        let stuck = self.store().stuck_jobs(&cutoff).await?;
        for job in &stuck {
            let reason = format!(
                "stuck: no progress for {}; its turn was interrupted",
                reef_schedule::format_duration(after)
            );
            tracing::warn!(job = job.id, agent = ?job.agent_name, "{reason}");
            self.stop_job(job, JobState::Failed, &reason).await?;
            self.record_event(
                "job.stuck",
                job.agent_id.as_deref().map(AgentId::from).as_ref(),
                json!({"job_id": job.id, "agent": job.agent_name, "reason": reason}),
            )
            .await?;
        }
        Ok(stuck.len())
    }
}
