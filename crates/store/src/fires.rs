//! Fires of routines: each claimed under its identity (routine, key) in the same
//! transaction as its effect (the message delivered, the job that spawns an agent, a failure,
//! a skip with its reason), so a crash between claim and effect can neither lose nor repeat
//! one; the fire history; the event listener's place in the history; pruning.

use crate::error::StoreError;
use crate::events::insert_event;
use crate::inbox::{Letter, deliver_in};
use crate::jobs::{JobEnd, JobState, end_job_in};
use crate::routines::by_id_in;
use crate::sql::{Conn, OptionalExtension, TransactionBehavior, params};
use crate::store::{Store, from_sql_int, to_sql_int};
use serde::Serialize;
use serde_json::json;

/// One fire to claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FireClaim {
    pub routine_id: String,
    /// `at:MS` for a timed fire, `event:SEQ`, `hook:SIGNATURE`, `manual:ID`.
    pub key: String,
    pub scheduled_ms: i64,
    /// Move the routine's watermark up to `scheduled_ms` (timed fires).
    pub advance_watermark: bool,
    /// Checked in the claim's transaction: skip while a run of the routine is going
    /// (`concurrency = "skip"`), or within this many milliseconds of its last run.
    pub guard: ClaimGuard,
    pub effect: FireEffect,
}

/// What a claim checks before its effect, in its own transaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClaimGuard {
    pub skip_if_running: bool,
    pub cooldown_ms: i64,
}

/// What a claimed fire does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FireEffect {
    /// Delivers the letter; the job runs until its message is finished.
    Deliver(Letter),
    /// Like `Deliver`, for a heartbeat: its job's answer goes to the agent's owner unless it
    /// is only `HEARTBEAT_OK`.
    Heartbeat(Letter),
    /// A pending job for the runtime to start by spawning an agent named
    /// `{name_prefix}-{job id}`.
    Spawn { name_prefix: String },
    /// A job that fails at once with the reason (its target is missing); it counts toward
    /// the routine's `max_failures`.
    Fail { reason: String },
    /// Recorded as skipped, with the reason.
    Skip { reason: String },
}

/// What became of a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// A job was created (running for a delivery, pending otherwise).
    Job {
        job_id: u64,
        inbox_id: Option<u64>,
    },
    /// The target agent is gone: the job failed at once and counts as a failure.
    Failed {
        job_id: u64,
        reason: String,
    },
    Skipped,
    /// This fire had been claimed before: nothing was done again.
    AlreadyClaimed,
}

fn claim_in(tx: &Conn, now: &str, now_ms: i64, claim: &FireClaim) -> Result<Claimed, StoreError> {
    let routine = by_id_in(tx, &claim.routine_id)?;
    if claim.advance_watermark && claim.scheduled_ms > routine.watermark_ms {
        tx.prepare_cached("UPDATE routines SET watermark_ms = ?1 WHERE id = ?2")?
            .execute(params![claim.scheduled_ms, claim.routine_id])?;
    }
    let known: Option<i64> = tx
        .prepare_cached("SELECT 1 FROM routine_fires WHERE routine_id = ?1 AND fire_key = ?2")?
        .query_row(params![claim.routine_id, claim.key], |r| r.get(0))
        .optional()?;
    if known.is_some() {
        return Ok(Claimed::AlreadyClaimed);
    }
    // Disabled since the caller looked (a run failed once too often): nothing runs.
    let disabled = FireEffect::Skip {
        reason: "the routine is disabled".into(),
    };
    let busy = if claim.guard.skip_if_running
        && matches!(
            claim.effect,
            FireEffect::Deliver(_) | FireEffect::Heartbeat(_) | FireEffect::Spawn { .. }
        ) {
        tx.prepare_cached(
            "SELECT id FROM jobs WHERE routine_id = ?1 AND state IN ('pending', 'running')
             ORDER BY id LIMIT 1",
        )?
        .query_row(params![claim.routine_id], |r| r.get::<i64>(0))
        .optional()?
        .map(|job| FireEffect::Skip {
            reason: format!("job {job} of this routine is still going (concurrency = skip)"),
        })
    } else {
        None
    };
    let cooling = match routine.last_run_ms {
        // A last run in the future is a clock that was set back: no cooldown from it.
        Some(last)
            if claim.guard.cooldown_ms > 0
                && last <= now_ms
                && now_ms < last.saturating_add(claim.guard.cooldown_ms) =>
        {
            Some(FireEffect::Skip {
                reason: format!(
                    "cooling down ({}s since the last run, cooldown {}s)",
                    (now_ms - last).max(0) / 1000,
                    claim.guard.cooldown_ms / 1000
                ),
            })
        }
        _ => None,
    };
    let effect = if !routine.enabled {
        &disabled
    } else if let Some(skip) = busy.as_ref().or(cooling.as_ref()) {
        skip
    } else {
        &claim.effect
    };
    let insert_job = |state: JobState,
                      agent: Option<(&str, &str)>,
                      inbox: Option<u64>,
                      deadline: Option<i64>|
     -> Result<u64, StoreError> {
        let id: i64 = tx
            .prepare_cached(
                "INSERT INTO jobs (kind, state, routine_id, routine, agent_id, agent_name, inbox_id,
                               scheduled_ms, deadline_ms, created_at, started_at, progress_at)
             VALUES ('routine', ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?9) RETURNING id",
            )?
            .query_row(params![
            state.as_str(),
            claim.routine_id,
            routine.name,
            agent.map(|a| a.0),
            agent.map(|a| a.1),
            inbox.map(to_sql_int),
            claim.scheduled_ms,
            deadline,
            now,
            (state == JobState::Running).then_some(now),
        ], |r| r.get(0))?;
        from_sql_int(id, "job id")
    };
    let (outcome, reason, job_id, claimed) = match effect {
        FireEffect::Deliver(letter) | FireEffect::Heartbeat(letter) => {
            match deliver_in(tx, now, letter) {
                Ok(delivery) => {
                    let name = crate::agents::agent_name(tx, &letter.to)?;
                    let job = insert_job(
                        JobState::Running,
                        Some((letter.to.as_str(), &name)),
                        Some(delivery.id),
                        None,
                    )?;
                    if matches!(effect, FireEffect::Heartbeat(_)) {
                        tx.prepare_cached("UPDATE jobs SET kind = 'heartbeat' WHERE id = ?1")?
                            .execute(params![to_sql_int(job)])?;
                    }
                    (
                        "run",
                        None,
                        Some(job),
                        Claimed::Job {
                            job_id: job,
                            inbox_id: Some(delivery.id),
                        },
                    )
                }
                Err(StoreError::NotFound(_)) => {
                    let reason = "the routine's agent no longer exists".to_owned();
                    let job = failed_job(&insert_job, tx, now, &reason)?;
                    (
                        "run",
                        Some(reason.clone()),
                        Some(job),
                        Claimed::Failed {
                            job_id: job,
                            reason,
                        },
                    )
                }
                Err(err) => return Err(err),
            }
        }
        FireEffect::Fail { reason } => {
            let job = failed_job(&insert_job, tx, now, reason)?;
            (
                "run",
                Some(reason.clone()),
                Some(job),
                Claimed::Failed {
                    job_id: job,
                    reason: reason.clone(),
                },
            )
        }
        FireEffect::Spawn { name_prefix } => {
            let job = insert_job(JobState::Pending, None, None, None)?;
            tx.prepare_cached("UPDATE jobs SET agent_name = ?1 WHERE id = ?2")?
                .execute(params![format!("{name_prefix}-{job}"), to_sql_int(job)])?;
            (
                "run",
                None,
                Some(job),
                Claimed::Job {
                    job_id: job,
                    inbox_id: None,
                },
            )
        }
        FireEffect::Skip { reason } => ("skipped", Some(reason.clone()), None, Claimed::Skipped),
    };
    tx.prepare_cached(
        "INSERT INTO routine_fires (routine_id, fire_key, scheduled_ms, outcome, reason, job_id,
                                    claimed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        claim.routine_id,
        claim.key,
        claim.scheduled_ms,
        outcome,
        reason,
        job_id.map(to_sql_int),
        now
    ])?;
    if outcome == "run" {
        tx.prepare_cached("UPDATE routines SET last_run_ms = ?1 WHERE id = ?2")?
            .execute(params![now_ms, claim.routine_id])?;
    }
    insert_event(
        tx,
        now,
        "routine.fired",
        None,
        &json!({"routine": routine.name, "key": claim.key, "scheduled_ms": claim.scheduled_ms,
                "outcome": outcome, "reason": reason, "job_id": job_id}),
    )?;
    Ok(claimed)
}

/// The signature of the job inserter inside a claim.
type InsertJob<'a> = dyn Fn(JobState, Option<(&str, &str)>, Option<u64>, Option<i64>) -> Result<u64, StoreError>
    + 'a;

/// Creates a job that failed at once, counting toward its routine's `max_failures`.
fn failed_job(
    insert_job: &InsertJob<'_>,
    tx: &Conn,
    now: &str,
    reason: &str,
) -> Result<u64, StoreError> {
    let job = insert_job(JobState::Pending, None, None, None)?;
    let end = JobEnd {
        state: JobState::Failed,
        reason: Some(reason.to_owned()),
        result: None,
    };
    end_job_in(tx, now, job, &end)?;
    Ok(job)
}

/// One line of a routine's fire history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FireRecord {
    pub key: String,
    pub scheduled_ms: i64,
    /// `run` or `skipped`.
    pub outcome: String,
    pub reason: Option<String>,
    pub job_id: Option<u64>,
    /// The job's state, for a run.
    pub state: Option<String>,
    pub claimed_at: String,
}

impl Store {
    /// Claims fires in one transaction, each under its identity; see [`FireEffect`].
    pub async fn claim_fires(
        &self,
        claims: Vec<FireClaim>,
        now_ms: i64,
    ) -> Result<Vec<Claimed>, StoreError> {
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let mut out = Vec::with_capacity(claims.len());
            for claim in &claims {
                out.push(claim_in(&tx, &now, now_ms, claim)?);
            }
            tx.commit()?;
            Ok(out)
        })
        .await
    }

    /// A routine's fires, newest first, at most `limit`.
    pub async fn routine_fires(
        &self,
        routine_id: &str,
        limit: usize,
    ) -> Result<Vec<FireRecord>, StoreError> {
        let routine_id = routine_id.to_owned();
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(
                "SELECT f.fire_key, f.scheduled_ms, f.outcome, f.reason, f.job_id, j.state,
                        f.claimed_at
                 FROM routine_fires f LEFT JOIN jobs j ON j.id = f.job_id
                 WHERE f.routine_id = ?1 ORDER BY f.scheduled_ms DESC, f.claimed_at DESC
                 LIMIT ?2",
            )?;
            let rows = stmt.query_map(
                params![routine_id, i64::try_from(limit).unwrap_or(i64::MAX)],
                |r| {
                    Ok(FireRecord {
                        key: r.get(0)?,
                        scheduled_ms: r.get(1)?,
                        outcome: r.get(2)?,
                        reason: r.get(3)?,
                        job_id: r.get::<Option<i64>>(4)?.and_then(|v| u64::try_from(v).ok()),
                        state: r.get(5)?,
                        claimed_at: r.get(6)?,
                    })
                },
            )?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Where the scheduler's event listener stopped reading the history.
    pub async fn scheduler_cursor(&self) -> Result<Option<u64>, StoreError> {
        self.run(|db| {
            let seq: Option<i64> = db
                .conn
                .prepare_cached("SELECT seq FROM scheduler_cursor WHERE id = 1")?
                .query_row(params![], |r| r.get(0))
                .optional()?;
            seq.map(|s| from_sql_int(s, "cursor")).transpose()
        })
        .await
    }

    pub async fn set_scheduler_cursor(&self, seq: u64) -> Result<(), StoreError> {
        self.run(move |db| {
            db.conn
                .prepare_cached(
                    "INSERT INTO scheduler_cursor (id, seq) VALUES (1, ?1)
                     ON CONFLICT (id) DO UPDATE SET seq = excluded.seq",
                )?
                .execute(params![to_sql_int(seq)])?;
            Ok(())
        })
        .await
    }

    /// Forgets fires claimed and jobs ended before `cutoff` (a store timestamp); returns how
    /// many rows went.
    pub async fn prune_routine_history(&self, cutoff: &str) -> Result<u64, StoreError> {
        let cutoff = cutoff.to_owned();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let fires = tx
                .prepare_cached("DELETE FROM routine_fires WHERE claimed_at < ?1")?
                .execute(params![cutoff])?;
            let jobs = tx
                .prepare_cached(
                    "DELETE FROM jobs WHERE ended_at < ?1
                     AND id NOT IN (SELECT job_id FROM routine_fires WHERE job_id IS NOT NULL)",
                )?
                .execute(params![cutoff])?;
            tx.commit()?;
            Ok(u64::try_from(fires + jobs).unwrap_or(u64::MAX))
        })
        .await
    }
}
