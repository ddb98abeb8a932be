//! Jobs at run time: cancelling one (a spawned run's agent is destroyed; a turn is interrupted
//! and its message taken out of the inbox unread), and failing stuck ones: a turn whose agent
//! has recorded nothing for `jobs.stuck_after` is interrupted the same way, with the reason.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_core::AgentId;
use reef_store::{InboxStatus, JobEnd, JobRecord, JobState};
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
        let ended = self
            .store()
            .end_job(
                job.id,
                JobEnd {
                    state,
                    reason: Some(reason.to_owned()),
                    result: None,
                },
            )
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
            let working = self
                .store()
                .inbox(&agent, InboxStatus::Processing)
                .await?
                .iter()
                .any(|m| m.id == inbox);
            if working {
                // Interrupted, the message goes back to the inbox; then it is dropped.
                self.stop_worker(&agent).await;
            }
            self.store().drop_message(inbox, reason).await?;
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
