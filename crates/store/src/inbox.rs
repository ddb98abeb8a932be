//! Durable inboxes: at-least-once delivery made idempotent by a per-recipient key, a claim
//! that marks a message in progress, and completion. A message claimed by a process that
//! died goes back to `pending` through `release_claimed` at the next start.

use crate::agents::agent_name;
use crate::error::StoreError;
use crate::events::insert_event;
use crate::jobs::{JobEnd, JobState, end_job_for_inbox_in};
use crate::pending::{PendingStatus, resolve_in};
use crate::sql::{Conn, OptionalExtension, TransactionBehavior, params};
use crate::store::{Store, from_sql_int, to_sql_int};
use reef_core::AgentId;
use serde::Serialize;
use serde_json::json;

/// Where a message is in its recipient's inbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InboxStatus {
    Pending,
    /// Claimed by a turn that has not finished.
    Processing,
    Done,
}

impl InboxStatus {
    fn parse(s: &str) -> Option<InboxStatus> {
        match s {
            "pending" => Some(InboxStatus::Pending),
            "processing" => Some(InboxStatus::Processing),
            "done" => Some(InboxStatus::Done),
            _ => None,
        }
    }
}

/// One message in an inbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InboxMessage {
    pub id: u64,
    pub agent_id: AgentId,
    /// An agent name, `operator`, or `room:#name`.
    pub sender: String,
    pub body: String,
    pub dedup_key: String,
    /// The pending request this message answers when processed (request/response).
    pub request_id: Option<String>,
    pub status: InboxStatus,
    /// How many times it has been claimed (more than 1 after a crash mid-turn).
    pub attempts: u32,
    pub created_at: String,
}

/// The result of a delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub id: u64,
    /// The key had been delivered before: nothing new was stored.
    pub duplicate: bool,
}

const COLUMNS: &str =
    "id, agent_id, sender, body, dedup_key, status, attempts, created_at, request_id";

/// A message to put in an inbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Letter {
    pub to: AgentId,
    /// An agent name, `operator`, or `room:#name`.
    pub sender: String,
    pub body: String,
    /// Delivery is idempotent per recipient and key.
    pub dedup_key: String,
    /// A pending request the recipient's answer resolves.
    pub request_id: Option<String>,
}

/// Delivers `letter` inside the caller's transaction (see [`Store::deliver`]).
pub(crate) fn deliver_in(tx: &Conn, now: &str, letter: &Letter) -> Result<Delivery, StoreError> {
    let existing: Option<i64> = tx
        .prepare_cached("SELECT id FROM inbox WHERE agent_id = ?1 AND dedup_key = ?2")?
        .query_row(params![letter.to.as_str(), letter.dedup_key], |r| r.get(0))
        .optional()?;
    if let Some(id) = existing {
        return Ok(Delivery {
            id: from_sql_int(id, "inbox id")?,
            duplicate: true,
        });
    }
    let known: Option<i64> = tx
        .prepare_cached("SELECT 1 FROM agents WHERE id = ?1")?
        .query_row(params![letter.to.as_str()], |r| r.get(0))
        .optional()?;
    if known.is_none() {
        return Err(StoreError::NotFound(format!("agent {}", letter.to)));
    }
    let id: i64 = tx
        .prepare_cached(
            "INSERT INTO inbox (agent_id, sender, body, dedup_key, created_at, request_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
        )?
        .query_row(
            params![
                letter.to.as_str(),
                letter.sender,
                letter.body,
                letter.dedup_key,
                now,
                letter.request_id
            ],
            |r| r.get(0),
        )?;
    let id = from_sql_int(id, "inbox id")?;
    insert_event(
        tx,
        now,
        "message.delivered",
        Some(&letter.to),
        &json!({"inbox_id": id, "from": letter.sender, "body": letter.body,
                "request_id": letter.request_id}),
    )?;
    Ok(Delivery {
        id,
        duplicate: false,
    })
}

/// [`Store::drop_message`] inside the caller's transaction.
pub(crate) fn drop_message_in(
    tx: &Conn,
    now: &str,
    id: u64,
    reason: &str,
) -> Result<bool, StoreError> {
    let changed = tx
        .prepare_cached(
            "UPDATE inbox SET status = 'done', done_at = ?1
             WHERE id = ?2 AND status IN ('pending', 'processing')",
        )?
        .execute(params![now, to_sql_int(id)])?;
    if changed > 0
        && let Some(message) = message_by_id(tx, to_sql_int(id))?
        && let Some(request) = message.request_id
    {
        resolve_in(
            tx,
            now,
            &request,
            PendingStatus::Cancelled,
            Some(reason),
            None,
        )?;
    }
    Ok(changed > 0)
}

impl Store {
    /// Puts a message in `to`'s inbox unless one with the same `dedup_key` is there already,
    /// and records `message.delivered` for a new one. Both commit together.
    pub async fn deliver(
        &self,
        to: &AgentId,
        sender: &str,
        body: &str,
        dedup_key: &str,
    ) -> Result<Delivery, StoreError> {
        self.send(Letter {
            to: to.clone(),
            sender: sender.to_owned(),
            body: body.to_owned(),
            dedup_key: dedup_key.to_owned(),
            request_id: None,
        })
        .await
    }

    /// Delivers a [`Letter`]; like [`Store::deliver`].
    pub async fn send(&self, letter: Letter) -> Result<Delivery, StoreError> {
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let delivery = deliver_in(&tx, &now, &letter)?;
            tx.commit()?;
            Ok(delivery)
        })
        .await
    }

    /// Marks the oldest pending message of `agent` as processing and returns it.
    pub async fn claim_next(&self, agent: &AgentId) -> Result<Option<InboxMessage>, StoreError> {
        let agent = agent.clone();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let next: Option<i64> = tx
                .prepare_cached(
                    "SELECT id FROM inbox WHERE agent_id = ?1 AND status = 'pending'
                     ORDER BY id LIMIT 1",
                )?
                .query_row(params![agent.as_str()], |r| r.get(0))
                .optional()?;
            let Some(id) = next else {
                return Ok(None);
            };
            tx.prepare_cached(
                "UPDATE inbox SET status = 'processing', attempts = attempts + 1 WHERE id = ?1",
            )?
            .execute(params![id])?;
            // The turn that reads it is a job, unless a routine's job already is.
            let now = db.clock.now();
            tx.prepare_cached(
                "INSERT INTO jobs (kind, state, agent_id, agent_name, inbox_id, created_at,
                                   started_at, progress_at)
                 SELECT 'turn', 'running', a.id, a.name, ?1, ?2, ?2, ?2 FROM agents a
                 WHERE a.id = ?3 AND NOT EXISTS (
                     SELECT 1 FROM jobs WHERE inbox_id = ?1 AND state IN ('pending', 'running'))",
            )?
            .execute(params![id, now, agent.as_str()])?;
            let message = message_by_id(&tx, id)?;
            tx.commit()?;
            Ok(message)
        })
        .await
    }

    /// Marks a claimed message done. Finishing a message that is not `processing` is a
    /// `Conflict` (it was already finished, or never claimed).
    pub async fn finish_message(&self, id: u64) -> Result<(), StoreError> {
        self.complete_message(id, None).await.map(|_| ())
    }

    /// Marks a claimed message done and, when it carries a request and `answer` is given,
    /// answers that request (delivering the answer to whoever asked) in the same transaction,
    /// so a crash can neither lose the answer nor send it twice. Returns the agent that was
    /// sent the answer, if any (wake it).
    pub async fn complete_message(
        &self,
        id: u64,
        answer: Option<String>,
    ) -> Result<Option<AgentId>, StoreError> {
        self.finish_with(id, answer.map(|a| (PendingStatus::Answered, a)))
            .await
    }

    /// Marks a claimed message done whose turn could not produce an answer: its request, if
    /// still open, is cancelled with `reason` and the requester told, in the same transaction.
    pub async fn abandon_message(
        &self,
        id: u64,
        reason: &str,
    ) -> Result<Option<AgentId>, StoreError> {
        self.finish_with(id, Some((PendingStatus::Cancelled, reason.to_owned())))
            .await
    }

    async fn finish_with(
        &self,
        id: u64,
        resolution: Option<(PendingStatus, String)>,
    ) -> Result<Option<AgentId>, StoreError> {
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let changed = tx
                .prepare_cached(
                    "UPDATE inbox SET status = 'done', done_at = ?1
                     WHERE id = ?2 AND status = 'processing'",
                )?
                .execute(params![now, to_sql_int(id)])?;
            if changed == 0 {
                return Err(StoreError::Conflict(format!(
                    "inbox message {id} is not being processed"
                )));
            }
            let message = message_by_id(&tx, to_sql_int(id))?
                .ok_or_else(|| StoreError::NotFound(format!("inbox message {id}")))?;
            // The job this message was the work of (a routine's run) ends with it.
            let end = match &resolution {
                Some((PendingStatus::Cancelled, reason)) => JobEnd {
                    state: JobState::Failed,
                    reason: Some(reason.clone()),
                    result: None,
                },
                Some((_, answer)) => JobEnd {
                    state: JobState::Completed,
                    reason: None,
                    result: Some(answer.clone()),
                },
                None => JobEnd {
                    state: JobState::Completed,
                    reason: None,
                    result: None,
                },
            };
            end_job_for_inbox_in(&tx, &now, id, &end)?;
            let open = match &message.request_id {
                Some(request) => tx
                    .prepare_cached("SELECT status FROM pending WHERE id = ?1")?
                    .query_row(params![request], |r| r.get::<String>(0))
                    .optional()?
                    .is_some_and(|status| status == "pending"),
                None => false,
            };
            // A request already resolved (expired, cancelled) gets no second answer.
            let mut told = None;
            if let (true, Some(request), Some((status, text))) =
                (open, message.request_id, resolution)
            {
                let replier = agent_name(&tx, &message.agent_id)?;
                told =
                    resolve_in(&tx, &now, &request, status, Some(&text), Some(&replier))?.agent_id;
            }
            tx.commit()?;
            Ok(told)
        })
        .await
    }

    /// Takes a message out of its inbox unread: `pending` or `processing` becomes `done`, and
    /// a request on it is cancelled with `reason`. `false` when it had already been finished.
    pub async fn drop_message(&self, id: u64, reason: &str) -> Result<bool, StoreError> {
        let reason = reason.to_owned();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let dropped = drop_message_in(&tx, &now, id, &reason)?;
            tx.commit()?;
            Ok(dropped)
        })
        .await
    }

    /// Puts one claimed message back to `pending` (its turn was interrupted by a shutdown).
    pub async fn release_message(&self, id: u64) -> Result<(), StoreError> {
        self.run(move |db| {
            db.conn
                .prepare_cached(
                    "UPDATE inbox SET status = 'pending' WHERE id = ?1 AND status = 'processing'",
                )?
                .execute(params![to_sql_int(id)])?;
            Ok(())
        })
        .await
    }

    /// Puts every `processing` message back to `pending` (at start-up: the process that
    /// claimed them is gone). Returns how many.
    pub async fn release_claimed(&self) -> Result<u64, StoreError> {
        self.run(|db| {
            let n = db
                .conn
                .prepare_cached("UPDATE inbox SET status = 'pending' WHERE status = 'processing'")?
                .execute(params![])?;
            Ok(u64::try_from(n).unwrap_or(u64::MAX))
        })
        .await
    }

    /// Puts `agent`'s `processing` messages back to `pending` (in cluster mode, when this node
    /// takes the agent over from one that stopped renewing its lease mid-turn). Returns how
    /// many.
    pub async fn release_claimed_of(&self, agent: &AgentId) -> Result<u64, StoreError> {
        let agent = agent.clone();
        self.run(move |db| {
            let n = db
                .conn
                .prepare_cached(
                    "UPDATE inbox SET status = 'pending'
                     WHERE agent_id = ?1 AND status = 'processing'",
                )?
                .execute(params![agent.as_str()])?;
            Ok(u64::try_from(n).unwrap_or(u64::MAX))
        })
        .await
    }

    /// Messages waiting in every inbox, and messages a turn is working on.
    pub async fn inbox_counts(&self) -> Result<(u64, u64), StoreError> {
        self.run(|db| {
            let (pending, processing): (i64, i64) = db
                .conn
                .prepare_cached(
                    "SELECT COALESCE(SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END), 0),
                            COALESCE(SUM(CASE WHEN status = 'processing' THEN 1 ELSE 0 END), 0)
                     FROM inbox WHERE status IN ('pending', 'processing')",
                )?
                .query_row(params![], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok((
                u64::try_from(pending).unwrap_or(0),
                u64::try_from(processing).unwrap_or(0),
            ))
        })
        .await
    }

    /// Messages waiting in each agent's inbox (agents with none are left out).
    pub async fn inbox_depths(&self) -> Result<Vec<(AgentId, u64)>, StoreError> {
        self.run(|db| {
            let mut stmt = db.conn.prepare_cached(
                "SELECT agent_id, COUNT(*) FROM inbox WHERE status = 'pending'
                 GROUP BY agent_id ORDER BY agent_id",
            )?;
            let rows =
                stmt.query_map(params![], |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?)))?;
            let mut out = Vec::new();
            for row in rows {
                let (agent, depth) = row?;
                out.push((
                    AgentId::from_string(agent),
                    u64::try_from(depth).unwrap_or(0),
                ));
            }
            Ok(out)
        })
        .await
    }

    /// Messages of `agent` in `status`, oldest first.
    pub async fn inbox(
        &self,
        agent: &AgentId,
        status: InboxStatus,
    ) -> Result<Vec<InboxMessage>, StoreError> {
        let agent = agent.clone();
        self.run(move |db| {
            let status = match status {
                InboxStatus::Pending => "pending",
                InboxStatus::Processing => "processing",
                InboxStatus::Done => "done",
            };
            let mut stmt = db.conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM inbox WHERE agent_id = ?1 AND status = ?2 ORDER BY id"
            ))?;
            let rows = stmt.query_map(params![agent.as_str(), status], raw_message)?;
            let mut out = Vec::new();
            for row in rows {
                out.push(decode(row?)?);
            }
            Ok(out)
        })
        .await
    }
}

/// The columns of `COLUMNS`, before the status and counters are checked.
type RawMessage = (
    i64,
    String,
    String,
    String,
    String,
    String,
    i64,
    String,
    Option<String>,
);

fn raw_message(r: &crate::sql::Row<'_>) -> crate::sql::Result<RawMessage> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
    ))
}

pub(crate) fn message_by_id(conn: &Conn, id: i64) -> Result<Option<InboxMessage>, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM inbox WHERE id = ?1"))?
        .query_row(params![id], raw_message)
        .optional()?
        .map(decode)
        .transpose()
}

fn decode(raw: RawMessage) -> Result<InboxMessage, StoreError> {
    let (id, agent, sender, body, dedup_key, status, attempts, created_at, request_id) = raw;
    let status = InboxStatus::parse(&status)
        .ok_or_else(|| StoreError::Corrupt(format!("inbox message {id} has status {status:?}")))?;
    Ok(InboxMessage {
        id: from_sql_int(id, "inbox id")?,
        agent_id: AgentId::from_string(agent),
        sender,
        body,
        dedup_key,
        request_id,
        status,
        attempts: u32::try_from(attempts).map_err(|_| {
            StoreError::Corrupt(format!("inbox message {id} has {attempts} attempts"))
        })?,
        created_at,
    })
}
