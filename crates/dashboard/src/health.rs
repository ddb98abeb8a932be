//! Routine and job health on the overview: each routine with its trigger, state, failures in a
//! row, last run and next fire; open jobs counted; the newest jobs with how they ended.

use crate::Dash;
use crate::view::{Time, fragment};
use askama::Template;
use reef_core::Action;
use reef_runtime::{RoutineView, RuntimeError};
use reef_store::JobRecord;

/// The newest jobs listed on the overview.
const RECENT_JOBS: usize = 8;

#[derive(Template)]
#[template(path = "health.html")]
pub(crate) struct Health {
    pub routines: Vec<RoutineRow>,
    pub pending_jobs: u64,
    pub running_jobs: u64,
    pub jobs: Vec<JobRow>,
}

pub(crate) struct RoutineRow {
    pub name: String,
    pub trigger: String,
    pub action: String,
    /// `enabled`, or `disabled` with its reason in `why`.
    pub state: &'static str,
    pub why: String,
    pub failures: u32,
    pub last: Option<Time>,
    pub next: Option<Time>,
}

pub(crate) struct JobRow {
    pub id: u64,
    pub what: String,
    pub agent: String,
    pub state: &'static str,
    pub reason: String,
    pub at: Time,
}

/// The routines and jobs fragment.
pub(crate) async fn health(d: &Dash) -> Result<String, RuntimeError> {
    let routines = d
        .runtime
        .list_routines()
        .await?
        .into_iter()
        .map(routine_row)
        .collect();
    let (pending_jobs, running_jobs) = d.runtime.store().open_job_counts().await?;
    let jobs = d
        .runtime
        .list_jobs(None, RECENT_JOBS)
        .await?
        .into_iter()
        .map(job_row)
        .collect();
    Ok(fragment(&Health {
        routines,
        pending_jobs,
        running_jobs,
        jobs,
    }))
}

fn routine_row(view: RoutineView) -> RoutineRow {
    let r = view.record;
    let action = match &r.spec.action {
        Action::Message { agent, .. } => format!("message {agent}"),
        Action::Spawn { template, .. } => format!("spawn {template}"),
        Action::Heartbeat { agent, .. } => format!("heartbeat {agent}"),
    };
    RoutineRow {
        trigger: reef_config::describe_trigger(&r.spec.trigger),
        action,
        state: if r.enabled { "enabled" } else { "disabled" },
        why: r.disabled_reason.unwrap_or_default(),
        failures: r.failures,
        last: r.last_run_ms.map(Time::from_ms),
        next: view.next.as_deref().map(Time::parse),
        name: r.name,
    }
}

fn job_row(job: JobRecord) -> JobRow {
    let what = match &job.routine {
        Some(routine) => format!("{} {routine}", job.kind.as_str()),
        None => job.kind.as_str().to_owned(),
    };
    let at = job
        .ended_at
        .as_deref()
        .or(job.started_at.as_deref())
        .unwrap_or(&job.created_at);
    JobRow {
        id: job.id,
        what,
        agent: job.agent_name.unwrap_or_default(),
        state: job.state.as_str(),
        reason: job.reason.unwrap_or_default(),
        at: Time::parse(at),
    }
}
