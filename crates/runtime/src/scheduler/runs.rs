//! Spawned runs: a pending routine job becomes an ephemeral agent from the routine's template
//! with the fire's task (one at a time per routine, so `concurrency = "queue"` waits its turn),
//! and a run still going at its deadline is failed and its agent destroyed, transcript kept.
//! Starting is idempotent: the agent's name comes from the job, and its task is delivered in
//! the same transaction that marks the job running.

use super::plan::{Fire, cancel, rfc3339};
use crate::agents::SpawnRequest;
use crate::error::RuntimeError;
use crate::kernel::Runtime;
use chrono::{DateTime, Utc};
use reef_core::{Action, Budget};
use reef_store::{JobEnd, JobRecord, JobState, Letter};
use std::collections::HashSet;

/// Starts what may start and stops what is overdue; returns the next deadline of a run.
pub(super) async fn advance(
    rt: &Runtime,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, RuntimeError> {
    let now_ms = now.timestamp_millis();
    let open: Vec<JobRecord> = rt.store().jobs_to_advance().await?;
    let mut next = None;
    let mut busy: HashSet<String> = HashSet::new();
    for job in open.iter().filter(|j| j.state == JobState::Running) {
        match job.deadline_ms {
            // A deadline further than any timeout allows is a clock set back: overdue too.
            Some(deadline)
                if deadline <= now_ms
                    || deadline
                        > now_ms.saturating_add(
                            i64::try_from(reef_schedule::MAX_TIMEOUT_SECS * 1000).unwrap_or(0),
                        ) =>
            {
                time_out(rt, job).await?
            }
            Some(deadline) => {
                next = earliest(next, DateTime::from_timestamp_millis(deadline));
                busy.extend(job.routine_id.clone());
            }
            None => {
                busy.extend(job.routine_id.clone());
            }
        }
    }
    for job in open.iter().filter(|j| j.state == JobState::Pending) {
        let Some(routine) = &job.routine_id else {
            cancel(rt, job.id, "its routine was deleted").await?;
            continue;
        };
        if job.agent_name.is_none() || busy.contains(routine) {
            continue;
        }
        if let Some(deadline) = start(rt, job, now).await? {
            busy.insert(routine.clone());
            next = earliest(next, Some(deadline));
        }
    }
    Ok(next)
}

fn earliest(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Spawns the job's agent and hands it the task; returns the run's deadline when it started.
async fn start(
    rt: &Runtime,
    job: &JobRecord,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, RuntimeError> {
    let fail = |reason: String| JobEnd {
        state: JobState::Failed,
        reason: Some(reason),
        result: None,
    };
    let routine = match &job.routine_id {
        Some(id) => rt.store().routine_by_id(id).await?,
        None => None,
    };
    let Some(routine) = routine else {
        cancel(rt, job.id, "its routine was deleted").await?;
        return Ok(None);
    };
    let Action::Spawn {
        template,
        task,
        timeout_secs,
    } = &routine.spec.action
    else {
        cancel(rt, job.id, "its routine no longer spawns agents").await?;
        return Ok(None);
    };
    let Some(name) = job.agent_name.clone() else {
        return Ok(None);
    };
    let guard = &routine.spec.guardrails;
    let budget = (guard.run_tokens.is_some() || guard.run_cost_micros.is_some()).then(|| Budget {
        tokens: guard.run_tokens,
        cost_micros: guard.run_cost_micros,
        ..Budget::default()
    });
    let request = SpawnRequest {
        name: name.clone(),
        template: template.clone(),
        ephemeral: true,
        budget,
        ..SpawnRequest::default()
    };
    // An agent's routine spawns its children, clamped to it.
    let owner = match (&routine.owner, routine.source) {
        (Some(id), reef_store::RoutineSource::Agent) => rt.store().get_agent(id).await?,
        _ => None,
    };
    let agent = match rt.spawn_agent(request, owner.as_ref()).await {
        Ok(spawned) => spawned.agent,
        // Spawned before a crash, not started: take it up.
        Err(RuntimeError::Conflict(why)) => match rt.store().agent_by_name(&name).await? {
            Some(found)
                if found.ephemeral && found.template == *template && !found.state.is_final() =>
            {
                found
            }
            _ => {
                rt.store().end_job(job.id, fail(why)).await?;
                rt.bus().poke();
                return Ok(None);
            }
        },
        Err(
            err @ (RuntimeError::Invalid { .. }
            | RuntimeError::NotFound(_)
            | RuntimeError::Denied(_)),
        ) => {
            rt.store().end_job(job.id, fail(err.to_string())).await?;
            rt.bus().poke();
            return Ok(None);
        }
        Err(err) => return Err(err),
    };
    let scheduled = job
        .scheduled_ms
        .and_then(DateTime::from_timestamp_millis)
        .unwrap_or(now);
    let fire = Fire::timed(scheduled);
    let cause = if job.scheduled_ms.is_some() {
        fire.cause
    } else {
        format!("run at {}", rfc3339(now))
    };
    // At most seven days (checked when the routine was made; capped again here).
    let timeout = (*timeout_secs).min(reef_schedule::MAX_TIMEOUT_SECS);
    let deadline = now
        .checked_add_signed(chrono::Duration::seconds(
            i64::try_from(timeout).unwrap_or(0),
        ))
        .unwrap_or(now);
    let letter = Letter {
        to: agent.id.clone(),
        sender: format!("routine:{}", routine.name),
        body: format!("[routine {}, {cause}] {task}", routine.name),
        dedup_key: format!("routine-job:{}", job.id),
        request_id: None,
    };
    match rt
        .store()
        .start_job_with_task(job.id, letter, deadline.timestamp_millis())
        .await
    {
        Ok(_) => {}
        // Started meanwhile (another pass) or cancelled: nothing more to do.
        Err(reef_store::StoreError::Conflict(_)) => return Ok(None),
        Err(err) => return Err(err.into()),
    }
    rt.wake(&agent.id);
    rt.bus().poke();
    Ok(Some(deadline))
}

/// Fails a run past its deadline and destroys its agent; the transcript stays.
async fn time_out(rt: &Runtime, job: &JobRecord) -> Result<(), RuntimeError> {
    let limit = match (job.started_at.as_deref(), job.deadline_ms) {
        (Some(started), Some(_)) => format!("its timeout (started {started})"),
        _ => "its timeout".to_owned(),
    };
    let ended = rt
        .store()
        .end_job(
            job.id,
            JobEnd {
                state: JobState::Failed,
                reason: Some(format!("still running at {limit}")),
                result: None,
            },
        )
        .await?;
    if ended.is_some()
        && let Some(agent) = &job.agent_name
    {
        match rt.destroy_agent(agent, false).await {
            Ok(()) | Err(RuntimeError::NotFound(_)) => {}
            Err(err) => return Err(err),
        }
    }
    rt.bus().poke();
    Ok(())
}
