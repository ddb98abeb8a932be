//! Jobs: every routine run (and, through the runtime, every agent turn) with its state,
//! pending → running → completed | failed | cancelled, moved only along those edges. A routine
//! job that ends updates its routine's run of failures in the same transaction, disabling the
//! routine when it reaches `max_failures`.

use crate::error::StoreError;
use crate::events::insert_event;
use crate::inbox::{Letter, deliver_in};
use crate::sql::{Conn, OptionalExtension, Row, TransactionBehavior, params};
use crate::store::{Store, from_sql_int, to_sql_int};
use serde::Serialize;
use serde_json::json;

/// The room a spawned routine run reports to.
pub const REPORT_ROOM: &str = "#agents";

/// What a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    Routine,
    Turn,
    Heartbeat,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Routine => "routine",
            JobKind::Turn => "turn",
            JobKind::Heartbeat => "heartbeat",
        }
    }

    fn parse(s: &str) -> Option<JobKind> {
        [JobKind::Routine, JobKind::Turn, JobKind::Heartbeat]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Pending,
    Running,
    Completed,
    Failed,
    Cancelled,
}

/// Every job state, for help texts and argument checks.
pub const JOB_STATES: [JobState; 5] = [
    JobState::Pending,
    JobState::Running,
    JobState::Completed,
    JobState::Failed,
    JobState::Cancelled,
];

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<JobState> {
        JOB_STATES.into_iter().find(|k| k.as_str() == s)
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled
        )
    }

    /// Whether a job may move from `self` to `to`.
    pub fn can_become(self, to: JobState) -> bool {
        matches!(
            (self, to),
            (
                JobState::Pending,
                JobState::Running | JobState::Failed | JobState::Cancelled
            ) | (
                JobState::Running,
                JobState::Completed | JobState::Failed | JobState::Cancelled
            )
        )
    }
}

/// A job as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobRecord {
    pub id: u64,
    pub kind: JobKind,
    pub state: JobState,
    pub routine_id: Option<String>,
    /// The routine's name, kept after the routine is deleted.
    pub routine: Option<String>,
    pub agent_id: Option<String>,
    pub agent_name: Option<String>,
    /// The inbox message whose turn is this job's work.
    pub inbox_id: Option<u64>,
    /// The fire's scheduled instant, in milliseconds since the Unix epoch.
    pub scheduled_ms: Option<i64>,
    /// When a spawned run is stopped, in milliseconds since the Unix epoch.
    pub deadline_ms: Option<i64>,
    pub reason: Option<String>,
    /// The final answer of a completed run.
    pub result: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub progress_at: String,
}

pub(crate) const JOB_COLUMNS: &str = "id, kind, state, routine_id, routine, agent_id, agent_name, \
     inbox_id, scheduled_ms, deadline_ms, reason, result, created_at, started_at, ended_at, \
     progress_at";

pub(crate) fn job_from_row(row: &Row<'_>) -> crate::sql::Result<JobRecord> {
    let kind: String = row.get(1)?;
    let state: String = row.get(2)?;
    let bad = |what: &str, value: &str| crate::sql::Error::Column {
        index: 0,
        message: format!("unknown job {what} `{value}`"),
    };
    Ok(JobRecord {
        id: u64::try_from(row.get::<i64>(0)?).unwrap_or(0),
        kind: JobKind::parse(&kind).ok_or_else(|| bad("kind", &kind))?,
        state: JobState::parse(&state).ok_or_else(|| bad("state", &state))?,
        routine_id: row.get(3)?,
        routine: row.get(4)?,
        agent_id: row.get(5)?,
        agent_name: row.get(6)?,
        inbox_id: row
            .get::<Option<i64>>(7)?
            .and_then(|v| u64::try_from(v).ok()),
        scheduled_ms: row.get(8)?,
        deadline_ms: row.get(9)?,
        reason: row.get(10)?,
        result: row.get(11)?,
        created_at: row.get(12)?,
        started_at: row.get(13)?,
        ended_at: row.get(14)?,
        progress_at: row.get(15)?,
    })
}

pub(crate) fn job_in(conn: &Conn, id: u64) -> Result<Option<JobRecord>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))?
        .query_row(params![to_sql_int(id)], job_from_row)
        .optional()?)
}

/// How a job ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEnd {
    pub state: JobState,
    pub reason: Option<String>,
    pub result: Option<String>,
}

/// Moves job `id` to `end.state` if that is a valid move, inside the caller's transaction,
/// and settles its routine's run of failures. Returns the job as it ends, or `None` when it
/// had already ended.
pub(crate) fn end_job_in(
    tx: &Conn,
    now: &str,
    id: u64,
    end: &JobEnd,
) -> Result<Option<JobRecord>, StoreError> {
    let Some(job) = job_in(tx, id)? else {
        return Err(StoreError::NotFound(format!("job {id}")));
    };
    if !job.state.can_become(end.state) {
        return Ok(None);
    }
    tx.prepare_cached(
        "UPDATE jobs SET state = ?1, reason = COALESCE(?2, reason), result = ?3, ended_at = ?4,
                progress_at = ?4, started_at = COALESCE(started_at, ?4)
         WHERE id = ?5",
    )?
    .execute(params![
        end.state.as_str(),
        end.reason,
        end.result,
        now,
        to_sql_int(id)
    ])?;
    let ended = job_in(tx, id)?.ok_or_else(|| StoreError::NotFound(format!("job {id}")))?;
    insert_event(
        tx,
        now,
        "job.ended",
        None,
        &json!({"job_id": id, "kind": ended.kind, "state": ended.state,
                "routine": ended.routine, "agent": ended.agent_name,
                "reason": ended.reason, "result": ended.result}),
    )?;
    // A spawned run (it has a deadline) reports its answer in the agents' room.
    if let (JobState::Completed, Some(_), Some(text)) =
        (ended.state, ended.deadline_ms, ended.result.as_deref())
    {
        insert_event(
            tx,
            now,
            "routine.report",
            None,
            &json!({"room": REPORT_ROOM, "routine": ended.routine, "agent": ended.agent_name,
                    "job_id": id, "text": text}),
        )?;
    }
    if ended.kind == JobKind::Heartbeat && ended.state == JobState::Completed {
        heartbeat_answer_in(tx, now, &ended)?;
    }
    if let Some(routine_id) = &ended.routine_id {
        match end.state {
            JobState::Completed => {
                tx.prepare_cached("UPDATE routines SET failures = 0 WHERE id = ?1")?
                    .execute(params![routine_id])?;
            }
            JobState::Failed => {
                crate::routines::count_failure_in(tx, now, routine_id, end.reason.as_deref())?;
            }
            _ => {}
        }
    }
    Ok(Some(ended))
}

/// A heartbeat's answer: nothing when it is only `HEARTBEAT_OK`; otherwise it goes to the
/// agent's parent (a message in its inbox) or, with no parent, to the operator
/// (`heartbeat.alert` for the control room), in the transaction that ends the job.
fn heartbeat_answer_in(tx: &Conn, now: &str, job: &JobRecord) -> Result<(), StoreError> {
    let text = job.result.as_deref().unwrap_or_default().trim();
    if text == reef_core::HEARTBEAT_OK || text.is_empty() {
        return Ok(());
    }
    let agent = job.agent_name.clone().unwrap_or_default();
    let parent: Option<(String, String)> = match &job.agent_id {
        Some(id) => tx
            .prepare_cached(
                "SELECT p.id, p.name FROM agents a JOIN agents p ON p.id = a.parent_id
                 WHERE a.id = ?1",
            )?
            .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?,
        None => None,
    };
    if let Some((parent_id, _)) = &parent {
        deliver_in(
            tx,
            now,
            &Letter {
                to: reef_core::AgentId::from(parent_id.as_str()),
                sender: format!("heartbeat:{agent}"),
                body: format!("[heartbeat of {agent}] {text}"),
                dedup_key: format!("heartbeat-job:{}", job.id),
                request_id: None,
            },
        )?;
    }
    insert_event(
        tx,
        now,
        "heartbeat.alert",
        None,
        &json!({"agent": agent, "job_id": job.id, "text": text,
                "to": parent.map_or_else(|| "#control".to_owned(), |p| p.1)}),
    )?;
    Ok(())
}

/// Ends the open job whose work is inbox message `inbox_id`, if there is one.
pub(crate) fn end_job_for_inbox_in(
    tx: &Conn,
    now: &str,
    inbox_id: u64,
    end: &JobEnd,
) -> Result<Option<JobRecord>, StoreError> {
    let id: Option<i64> = tx
        .prepare_cached(
            "SELECT id FROM jobs WHERE inbox_id = ?1 AND state IN ('pending', 'running')",
        )?
        .query_row(params![to_sql_int(inbox_id)], |r| r.get(0))
        .optional()?;
    match id {
        Some(id) => end_job_in(tx, now, from_sql_int(id, "job id")?, end),
        None => Ok(None),
    }
}

impl Store {
    /// One job.
    pub async fn job(&self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        self.run(move |db| job_in(&db.conn, id)).await
    }

    /// Jobs, newest first, optionally in one state or of one routine, at most `limit`.
    pub async fn list_jobs(
        &self,
        state: Option<JobState>,
        routine_id: Option<String>,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs
                 WHERE (CAST(?1 AS TEXT) IS NULL OR state = ?1) AND (CAST(?2 AS TEXT) IS NULL OR routine_id = ?2)
                 ORDER BY id DESC LIMIT ?3"
            ))?;
            let rows = stmt.query_map(
                params![
                    state.map(JobState::as_str),
                    routine_id,
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                job_from_row,
            )?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Jobs waiting to start, and jobs running.
    pub async fn open_job_counts(&self) -> Result<(u64, u64), StoreError> {
        self.run(|db| {
            let (pending, running): (i64, i64) = db
                .conn
                .prepare_cached(
                    "SELECT COALESCE(SUM(CASE WHEN state = 'pending' THEN 1 ELSE 0 END), 0),
                            COALESCE(SUM(CASE WHEN state = 'running' THEN 1 ELSE 0 END), 0)
                     FROM jobs WHERE state IN ('pending', 'running')",
                )?
                .query_row(params![], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok((
                u64::try_from(pending).unwrap_or(0),
                u64::try_from(running).unwrap_or(0),
            ))
        })
        .await
    }

    /// The ids of one routine's jobs that have not ended, oldest first, at most `limit`.
    pub async fn open_routine_jobs(
        &self,
        routine_id: &str,
        limit: usize,
    ) -> Result<Vec<u64>, StoreError> {
        let routine_id = routine_id.to_owned();
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(
                "SELECT id FROM jobs WHERE routine_id = ?1 AND state IN ('pending', 'running')
                 ORDER BY id LIMIT ?2",
            )?;
            let rows = stmt.query_map(
                params![routine_id, i64::try_from(limit).unwrap_or(i64::MAX)],
                |r| r.get::<i64>(0),
            )?;
            rows.map(|id| from_sql_int(id?, "job id"))
                .collect::<Result<Vec<_>, _>>()
        })
        .await
    }

    /// Routine jobs the scheduler moves on: pending ones, and spawned runs with a deadline.
    pub async fn jobs_to_advance(&self) -> Result<Vec<JobRecord>, StoreError> {
        self.open_jobs_where(
            "CAST(?1 AS TEXT) IS NULL AND (state = 'pending' OR (state = 'running' AND deadline_ms IS NOT NULL))",
            None,
        )
        .await
    }

    async fn open_jobs_where(
        &self,
        filter: &'static str,
        param: Option<String>,
    ) -> Result<Vec<JobRecord>, StoreError> {
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ('pending', 'running') AND {filter}
                 ORDER BY id"
            ))?;
            let rows = stmt.query_map(params![param], job_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Tokens (input + output) and cost in millionths of a US dollar that the runs of a
    /// routine started at or after `since` (a store timestamp) have used so far: the model
    /// requests of each run's agent between its start and end.
    pub async fn routine_spend_since(
        &self,
        routine_id: &str,
        since: &str,
    ) -> Result<(u64, u64), StoreError> {
        let (routine_id, since) = (routine_id.to_owned(), since.to_owned());
        self.run(move |db| {
            let (tokens, cost): (i64, i64) = db
                .conn
                .prepare_cached(
                    "SELECT COALESCE(SUM(u.input_tokens + u.output_tokens), 0),
                            COALESCE(SUM(u.cost_micros), 0)
                     FROM jobs j
                     JOIN sessions s ON s.agent = j.agent_name
                     JOIN model_usage u ON u.session_id = s.id
                          AND u.created_at >= j.started_at
                          AND (j.ended_at IS NULL OR u.created_at <= j.ended_at)
                     WHERE j.routine_id = ?1 AND j.started_at >= ?2",
                )?
                .query_row(params![routine_id, since], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok((
                u64::try_from(tokens).unwrap_or(0),
                u64::try_from(cost).unwrap_or(0),
            ))
        })
        .await
    }

    /// Running jobs whose message a turn is working on and whose agent has recorded nothing
    /// since `cutoff` (a store timestamp): stuck.
    pub async fn stuck_jobs(&self, cutoff: &str) -> Result<Vec<JobRecord>, StoreError> {
        let cutoff = cutoff.to_owned();
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs j
                 WHERE j.state = 'running' AND j.started_at < ?1
                   AND EXISTS (SELECT 1 FROM inbox i WHERE i.id = j.inbox_id
                               AND i.status = 'processing')
                   AND COALESCE((SELECT e.created_at FROM events e WHERE e.agent_id = j.agent_id
                                 ORDER BY e.seq DESC LIMIT 1), j.started_at) < ?1
                 ORDER BY j.id"
            ))?;
            let rows = stmt.query_map(params![cutoff], job_from_row)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Starts a pending routine job whose agent now exists: its task is delivered to the agent
    /// and the job runs until that message is finished or `deadline_ms` passes, in one
    /// transaction. A job no longer pending is a `Conflict`.
    pub async fn start_job_with_task(
        &self,
        id: u64,
        task: Letter,
        deadline_ms: i64,
    ) -> Result<JobRecord, StoreError> {
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let job = job_in(&tx, id)?.ok_or_else(|| StoreError::NotFound(format!("job {id}")))?;
            if job.state != JobState::Pending {
                return Err(StoreError::Conflict(format!(
                    "job {id} is {}, it cannot start",
                    job.state.as_str()
                )));
            }
            let delivery = deliver_in(&tx, &now, &task)?;
            tx.prepare_cached(
                "UPDATE jobs SET state = 'running', started_at = ?1, progress_at = ?1,
                        agent_id = ?2, inbox_id = ?3, deadline_ms = ?4
                 WHERE id = ?5",
            )?
            .execute(params![
                now,
                task.to.as_str(),
                to_sql_int(delivery.id),
                deadline_ms,
                to_sql_int(id)
            ])?;
            let job = job_in(&tx, id)?.ok_or_else(|| StoreError::NotFound(format!("job {id}")))?;
            tx.commit()?;
            Ok(job)
        })
        .await
    }

    /// Ends a job as `state` with `reason` and, in the same transaction, takes its message
    /// out of the inbox unread (a `pending` or `processing` message becomes `done`; a request
    /// on it is cancelled). `Ok(None)`: it had already ended.
    pub async fn stop_job_and_message(
        &self,
        id: u64,
        state: JobState,
        reason: &str,
    ) -> Result<Option<JobRecord>, StoreError> {
        let reason = reason.to_owned();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let end = JobEnd {
                state,
                reason: Some(reason.clone()),
                result: None,
            };
            let ended = end_job_in(&tx, &now, id, &end)?;
            if let Some(job) = &ended
                && job.deadline_ms.is_none()
                && let Some(inbox) = job.inbox_id
            {
                crate::inbox::drop_message_in(&tx, &now, inbox, &reason)?;
            }
            tx.commit()?;
            Ok(ended)
        })
        .await
    }

    /// The newest job run by an agent of this name.
    pub async fn last_job_of_agent(&self, name: &str) -> Result<Option<JobRecord>, StoreError> {
        let name = name.to_owned();
        self.run(move |db| {
            Ok(db
                .conn
                .prepare_cached(&format!(
                    "SELECT {JOB_COLUMNS} FROM jobs WHERE agent_name = ?1 ORDER BY id DESC LIMIT 1"
                ))?
                .query_row(params![name], job_from_row)
                .optional()?)
        })
        .await
    }

    /// Ends a job. `Ok(None)`: it had already ended (or cannot move to that state).
    pub async fn end_job(&self, id: u64, end: JobEnd) -> Result<Option<JobRecord>, StoreError> {
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let ended = end_job_in(&tx, &now, id, &end)?;
            tx.commit()?;
            Ok(ended)
        })
        .await
    }
}
