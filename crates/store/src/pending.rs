//! Pending items: things someone waits for — an operator question, an approval of a
//! dangerous command, a request waiting for another agent's reply. One lifecycle for all:
//! pending → answered | cancelled | expired, each change committed with its event and, when
//! an agent waits, with the message that tells it (so the answer wakes it exactly once).

use crate::agents::agent_name;
use crate::error::StoreError;
use crate::events::insert_event;
use crate::inbox::{Letter, deliver_in};
use crate::sql::{Conn, OptionalExtension, Row, TransactionBehavior, params};
use crate::store::Store;
use reef_core::AgentId;
use serde::Serialize;
use serde_json::json;

/// What kind of answer is awaited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingKind {
    /// `ask_operator`: free text or one of the offered options.
    Question,
    /// A command that matched a dangerous pattern: `approved` or `denied`.
    Approval,
    /// A message to another agent whose reply is awaited.
    Request,
    /// A daemon agent's turn paused by the operator's debugger; the agent is not told of
    /// its resolution (its turn goes on).
    Breakpoint,
}

impl PendingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PendingKind::Question => "question",
            PendingKind::Approval => "approval",
            PendingKind::Request => "request",
            PendingKind::Breakpoint => "breakpoint",
        }
    }

    fn parse(s: &str) -> Option<PendingKind> {
        [
            PendingKind::Question,
            PendingKind::Approval,
            PendingKind::Request,
            PendingKind::Breakpoint,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// Where a pending item is in its lifecycle; all but `Pending` are final.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingStatus {
    Pending,
    Answered,
    Cancelled,
    Expired,
}

impl PendingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PendingStatus::Pending => "pending",
            PendingStatus::Answered => "answered",
            PendingStatus::Cancelled => "cancelled",
            PendingStatus::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<PendingStatus> {
        [
            PendingStatus::Pending,
            PendingStatus::Answered,
            PendingStatus::Cancelled,
            PendingStatus::Expired,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// A pending item as stored.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PendingItem {
    pub id: String,
    pub kind: PendingKind,
    /// Who waits for the answer; `None` is the operator.
    pub agent_id: Option<AgentId>,
    /// For a request: the agent asked to reply.
    pub target_id: Option<AgentId>,
    pub payload: serde_json::Value,
    pub status: PendingStatus,
    pub answer: Option<String>,
    /// Unix seconds after which it expires; `None` never does.
    pub expires_at: Option<i64>,
    pub created_at: String,
    pub resolved_at: Option<String>,
    /// A request the asker still owes a reply to: the notice of this item's resolution
    /// carries it, so the turn that reads the answer replies to that request.
    pub followup_request: Option<String>,
}

/// A new pending item. For a request, `letter` is delivered to the target in the same
/// transaction, carrying the item's id so the target's answer resolves it.
#[derive(Clone, Debug, PartialEq)]
pub struct NewPending {
    pub id: String,
    pub kind: PendingKind,
    pub agent_id: Option<AgentId>,
    pub target_id: Option<AgentId>,
    pub payload: serde_json::Value,
    pub expires_at: Option<i64>,
    pub letter: Option<Letter>,
    /// A request the asker will answer once this is resolved (see
    /// [`PendingItem::followup_request`]).
    pub followup_request: Option<String>,
}

const COLUMNS: &str = "id, kind, agent_id, target_id, payload, status, answer, expires_at, \
                       created_at, resolved_at, followup_request";

impl Store {
    /// Records a pending item (and delivers its letter) with a `KIND.created` event.
    pub async fn create_pending(&self, new: NewPending) -> Result<PendingItem, StoreError> {
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            tx.prepare_cached(
                "INSERT INTO pending (id, kind, agent_id, target_id, payload, expires_at,
                                      created_at, followup_request)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                new.id,
                new.kind.as_str(),
                new.agent_id.as_ref().map(AgentId::as_str),
                new.target_id.as_ref().map(AgentId::as_str),
                new.payload.to_string(),
                new.expires_at,
                now,
                new.followup_request
            ])?;
            if let Some(mut letter) = new.letter {
                letter.request_id = Some(new.id.clone());
                deliver_in(&tx, &now, &letter)?;
            }
            insert_event(
                &tx,
                &now,
                &format!("{}.created", new.kind.as_str()),
                new.agent_id.as_ref(),
                &json!({"id": new.id, "payload": new.payload, "expires_at": new.expires_at,
                        "target": new.target_id.as_ref().map(AgentId::as_str)}),
            )?;
            let item = pending_by_id(&tx, &new.id)?
                .ok_or_else(|| StoreError::NotFound(format!("pending item {}", new.id)))?;
            tx.commit()?;
            Ok(item)
        })
        .await
    }

    /// The pending item with this id, or the only one whose id starts with it.
    pub async fn get_pending(&self, id_or_prefix: &str) -> Result<PendingItem, StoreError> {
        let prefix = id_or_prefix.to_owned();
        self.run(move |db| {
            if let Some(item) = pending_by_id(&db.conn, &prefix)? {
                return Ok(item);
            }
            let escaped = prefix
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            let mut stmt = db.conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM pending WHERE id LIKE ?1 || '%' ESCAPE '\\' LIMIT 2"
            ))?;
            let mut found = stmt
                .query_map(params![escaped], raw)?
                .collect::<Result<Vec<_>, _>>()?;
            match found.len() {
                0 => Err(StoreError::NotFound(format!(
                    "pending item {prefix}; `reef questions` lists them"
                ))),
                1 => found.remove(0).decode(),
                _ => {
                    let matches: i64 = db
                        .conn
                        .prepare_cached(
                            "SELECT COUNT(*) FROM pending WHERE id LIKE ?1 || '%' ESCAPE '\\'",
                        )?
                        .query_row(params![escaped], |r| r.get(0))?;
                    Err(StoreError::Ambiguous {
                        prefix,
                        matches: usize::try_from(matches).unwrap_or(usize::MAX),
                    })
                }
            }
        })
        .await
    }

    /// Pending items, oldest first, optionally only those in `status`.
    pub async fn list_pending(
        &self,
        status: Option<PendingStatus>,
    ) -> Result<Vec<PendingItem>, StoreError> {
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM pending WHERE CAST(?1 AS TEXT) IS NULL OR status = ?1
                 ORDER BY created_at, id"
            ))?;
            let rows = stmt.query_map(params![status.map(PendingStatus::as_str)], raw)?;
            rows.map(|r| r?.decode()).collect()
        })
        .await
    }

    /// Moves a pending item to a final `status`. When an agent waits for it, `notice` (from
    /// `sender`) is delivered to its inbox in the same transaction. A final item is a
    /// `Conflict`.
    pub async fn resolve_pending(
        &self,
        id: &str,
        status: PendingStatus,
        answer: Option<String>,
        sender: Option<String>,
    ) -> Result<PendingItem, StoreError> {
        let id = id.to_owned();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let now = db.clock.now();
            let item = resolve_in(&tx, &now, &id, status, answer.as_deref(), sender.as_deref())?;
            tx.commit()?;
            Ok(item)
        })
        .await
    }

    /// Pending items whose deadline is at or before `now_unix`.
    pub async fn due_pending(&self, now_unix: i64) -> Result<Vec<PendingItem>, StoreError> {
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM pending
                 WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= ?1
                 ORDER BY expires_at"
            ))?;
            let rows = stmt.query_map(params![now_unix], raw)?;
            rows.map(|r| r?.decode()).collect()
        })
        .await
    }

    /// The earliest deadline of a pending item, if any.
    pub async fn next_deadline(&self) -> Result<Option<i64>, StoreError> {
        self.run(|db| {
            Ok(db
                .conn
                .prepare_cached("SELECT MIN(expires_at) FROM pending WHERE status = 'pending'")?
                .query_row(params![], |r| r.get::<Option<i64>>(0))?)
        })
        .await
    }
}

/// Resolves `id` inside the caller's transaction; see [`Store::resolve_pending`].
pub(crate) fn resolve_in(
    tx: &Conn,
    now: &str,
    id: &str,
    status: PendingStatus,
    answer: Option<&str>,
    sender: Option<&str>,
) -> Result<PendingItem, StoreError> {
    let Some(mut item) = pending_by_id(tx, id)? else {
        return Err(StoreError::NotFound(format!("pending item {id}")));
    };
    if item.status != PendingStatus::Pending {
        return Err(StoreError::Conflict(format!(
            "{} {id} is already {}",
            item.kind.as_str(),
            item.status.as_str()
        )));
    }
    if status == PendingStatus::Pending {
        return Err(StoreError::Conflict(format!(
            "{} {id} can only move to a final status",
            item.kind.as_str()
        )));
    }
    tx.prepare_cached(
        "UPDATE pending SET status = ?1, answer = ?2, resolved_at = ?3 WHERE id = ?4",
    )?
    .execute(params![status.as_str(), answer, now, id])?;
    item.status = status;
    item.answer = answer.map(str::to_owned);
    item.resolved_at = Some(now.to_owned());
    insert_event(
        tx,
        now,
        &format!("{}.{}", item.kind.as_str(), status.as_str()),
        item.agent_id.as_ref(),
        &json!({"id": id, "answer": answer, "by": sender}),
    )?;
    if let Some(agent) = &item.agent_id
        && item.kind != PendingKind::Breakpoint
    {
        let sender = match (sender, &item.target_id) {
            (Some(s), _) => s.to_owned(),
            (None, Some(target)) => agent_name(tx, target)?,
            (None, None) => "operator".to_owned(),
        };
        deliver_in(
            tx,
            now,
            &Letter {
                to: agent.clone(),
                sender,
                body: notice(&item),
                dedup_key: format!("pending:{id}"),
                request_id: item.followup_request.clone(),
            },
        )?;
    }
    Ok(item)
}

/// The message an agent waiting for `item` receives once it is resolved.
fn notice(item: &PendingItem) -> String {
    let what = match item.kind {
        PendingKind::Question => format!(
            "your question {} ({})",
            item.id,
            item.payload
                .get("question")
                .and_then(|q| q.as_str())
                .unwrap_or("")
        ),
        PendingKind::Approval => format!(
            "your request for approval {} (`{}`)",
            item.id,
            item.payload
                .get("command")
                .and_then(|q| q.as_str())
                .unwrap_or("")
        ),
        PendingKind::Request | PendingKind::Breakpoint => format!("your request {}", item.id),
    };
    match (item.status, &item.answer) {
        (PendingStatus::Answered, Some(answer)) => format!("Answer to {what}:\n{answer}"),
        (PendingStatus::Expired, _) => {
            format!("No answer to {what}: it expired without one. Decide without it.")
        }
        (PendingStatus::Cancelled, Some(reason)) => {
            format!("{what} was cancelled ({reason}); do not wait for it.")
        }
        (PendingStatus::Cancelled, None) => format!("{what} was cancelled; do not wait for it."),
        _ => format!("{what} is now {}.", item.status.as_str()),
    }
}

fn pending_by_id(conn: &Conn, id: &str) -> Result<Option<PendingItem>, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM pending WHERE id = ?1"))?
        .query_row(params![id], raw)
        .optional()?
        .map(RawPending::decode)
        .transpose()
}

struct RawPending {
    id: String,
    kind: String,
    agent_id: Option<String>,
    target_id: Option<String>,
    payload: String,
    status: String,
    answer: Option<String>,
    expires_at: Option<i64>,
    created_at: String,
    resolved_at: Option<String>,
    followup_request: Option<String>,
}

fn raw(r: &Row<'_>) -> crate::sql::Result<RawPending> {
    Ok(RawPending {
        id: r.get(0)?,
        kind: r.get(1)?,
        agent_id: r.get(2)?,
        target_id: r.get(3)?,
        payload: r.get(4)?,
        status: r.get(5)?,
        answer: r.get(6)?,
        expires_at: r.get(7)?,
        created_at: r.get(8)?,
        resolved_at: r.get(9)?,
        followup_request: r.get(10)?,
    })
}

impl RawPending {
    fn decode(self) -> Result<PendingItem, StoreError> {
        let corrupt = |what: &str| {
            StoreError::Corrupt(format!("pending item {} has an invalid {what}", self.id))
        };
        Ok(PendingItem {
            kind: PendingKind::parse(&self.kind).ok_or_else(|| corrupt("kind"))?,
            status: PendingStatus::parse(&self.status).ok_or_else(|| corrupt("status"))?,
            payload: serde_json::from_str(&self.payload).map_err(|_| corrupt("payload"))?,
            agent_id: self.agent_id.map(AgentId::from_string),
            target_id: self.target_id.map(AgentId::from_string),
            answer: self.answer,
            expires_at: self.expires_at,
            created_at: self.created_at,
            resolved_at: self.resolved_at,
            followup_request: self.followup_request,
            id: self.id,
        })
    }
}
