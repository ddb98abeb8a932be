//! The event history of the bus: append-only rows with a global sequence number, queried by
//! position and agent, and pruned to a bounded length. Events the operator must account for
//! are also written to the audit log in the same transaction (`audit.rs`).

use crate::error::StoreError;
use crate::sql::{Conn, params};
use crate::store::{Store, from_sql_int, to_sql_int};
use reef_core::AgentId;
use serde::Serialize;

/// One event as stored.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StoredEvent {
    /// Position in the history; strictly increasing, never reused.
    pub seq: u64,
    /// `agent.spawned`, `agent.state_changed`, `message.delivered`, …
    pub kind: String,
    pub agent_id: Option<AgentId>,
    pub data: serde_json::Value,
    pub created_at: String,
}

/// Which events a search returns; every field given narrows it.
#[derive(Clone, Debug, Default)]
pub struct EventFilter {
    /// A kind (`tool.call`), or a prefix ending in `.` (`tool.`).
    pub kind: Option<String>,
    pub agent: Option<AgentId>,
    /// RFC3339 bounds on the time: at or after `from`, before `until`.
    pub from: Option<String>,
    pub until: Option<String>,
    /// Only events older than this seq (paging back).
    pub before: Option<u64>,
}

type EventRow = (i64, String, Option<String>, String, String);

fn row(r: &crate::sql::Row<'_>) -> crate::sql::Result<EventRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn stored((seq, kind, agent_id, data, created_at): EventRow) -> Result<StoredEvent, StoreError> {
    let data = serde_json::from_str(&data)
        .map_err(|e| StoreError::Corrupt(format!("event {seq} has invalid JSON data: {e}")))?;
    Ok(StoredEvent {
        seq: from_sql_int(seq, "event seq")?,
        kind,
        agent_id: agent_id.map(AgentId::from_string),
        data,
        created_at,
    })
}

/// Appends one event inside the caller's transaction; returns its `seq`.
pub(crate) fn insert_event(
    conn: &Conn,
    now: &str,
    kind: &str,
    agent: Option<&AgentId>,
    data: &serde_json::Value,
) -> Result<u64, StoreError> {
    let seq: i64 = conn
        .prepare_cached(
            "INSERT INTO events (kind, agent_id, data, created_at) VALUES (?1, ?2, ?3, ?4)
             RETURNING seq",
        )?
        .query_row(
            params![kind, agent.map(AgentId::as_str), data.to_string(), now],
            |r| r.get(0),
        )?;
    let seq = from_sql_int(seq, "event seq")?;
    if let Some(kept) = crate::audit::audit_view(kind, data) {
        let name = match agent {
            // A destroyed agent's row is gone: its event names it.
            Some(id) => Some(
                crate::audit::agent_name(conn, id.as_str())?.unwrap_or_else(|| {
                    data.get("name")
                        .and_then(serde_json::Value::as_str)
                        .filter(|_| kind.starts_with("agent."))
                        .unwrap_or(id.as_str())
                        .to_owned()
                }),
            ),
            None => None,
        };
        crate::audit::insert_audit(conn, now, kind, name.as_deref(), &kept)?;
    }
    Ok(seq)
}

impl Store {
    /// Appends an event to the history and returns it.
    pub async fn append_event(
        &self,
        kind: &str,
        agent: Option<&AgentId>,
        data: serde_json::Value,
    ) -> Result<StoredEvent, StoreError> {
        let kind = kind.to_owned();
        let agent = agent.cloned();
        self.run(move |db| {
            let now = db.clock.now();
            // An event that is also an audit record is written with it or not at all.
            let tx = db
                .conn
                .transaction_with_behavior(crate::sql::TransactionBehavior::Immediate)?;
            let seq = insert_event(&tx, &now, &kind, agent.as_ref(), &data)?;
            tx.commit()?;
            Ok(StoredEvent {
                seq,
                kind,
                agent_id: agent,
                data,
                created_at: now,
            })
        })
        .await
    }

    /// Up to `limit` events with `seq > after`, oldest first; only `agent`'s when given.
    pub async fn events_after(
        &self,
        after: u64,
        agent: Option<&AgentId>,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let agent = agent.cloned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(
                "SELECT seq, kind, agent_id, data, created_at FROM events
                 WHERE seq > ?1 AND (CAST(?2 AS TEXT) IS NULL OR agent_id = ?2)
                 ORDER BY seq LIMIT ?3",
            )?;
            let rows = stmt.query_map(
                params![
                    to_sql_int(after),
                    agent.as_ref().map(AgentId::as_str),
                    limit
                ],
                row,
            )?;
            rows.map(|r| stored(r?)).collect()
        })
        .await
    }

    /// The newest `n` events (only `agent`'s when given), oldest first.
    pub async fn events_tail(
        &self,
        agent: Option<&AgentId>,
        n: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let agent = agent.cloned();
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let query_agent = agent.clone();
        let first: Option<i64> = self
            .run(move |db| {
                let agent = query_agent;
                Ok(db
                    .conn
                    .prepare_cached(
                        "SELECT MIN(seq) FROM (SELECT seq FROM events
                         WHERE (CAST(?1 AS TEXT) IS NULL OR agent_id = ?1) ORDER BY seq DESC LIMIT ?2) AS newest",
                    )?
                    .query_row(params![agent.as_ref().map(AgentId::as_str), n], |r| {
                        r.get(0)
                    })?)
            })
            .await?;
        match first {
            Some(first) => {
                let after = from_sql_int(first, "event seq")?.saturating_sub(1);
                let limit = usize::try_from(n).unwrap_or(usize::MAX);
                self.events_after(after, agent.as_ref(), limit).await
            }
            None => Ok(Vec::new()),
        }
    }

    /// Up to `limit` events matching `filter`, newest first: a search of the history.
    pub async fn search_events(
        &self,
        filter: EventFilter,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |db| {
            // A kind ending in `.` is a prefix (`tool.`, compared exactly, case and all);
            // otherwise the kind itself.
            let (kind, prefix) = match filter.kind.as_deref() {
                Some(k) if k.ends_with('.') => (None, Some(k.to_owned())),
                Some(k) => (Some(k.to_owned()), None),
                None => (None, None),
            };
            let mut stmt = db.conn.prepare_cached(
                "SELECT seq, kind, agent_id, data, created_at FROM events
                 WHERE (CAST(?1 AS TEXT) IS NULL OR kind = ?1) AND (CAST(?2 AS TEXT) IS NULL OR substr(kind, 1, length(CAST(?2 AS TEXT))) = ?2)
                   AND (CAST(?3 AS TEXT) IS NULL OR agent_id = ?3)
                   AND (CAST(?4 AS TEXT) IS NULL OR created_at >= ?4) AND (CAST(?5 AS TEXT) IS NULL OR created_at < ?5)
                   AND (CAST(?6 AS BIGINT) IS NULL OR seq < ?6)
                 ORDER BY seq DESC LIMIT ?7",
            )?;
            let rows = stmt.query_map(
                params![
                    kind,
                    prefix,
                    filter.agent.as_ref().map(AgentId::as_str),
                    filter.from,
                    filter.until,
                    filter.before.map(to_sql_int),
                    limit
                ],
                row,
            )?;
            rows.map(|r| stored(r?)).collect()
        })
        .await
    }

    /// The position of the newest event (0 when the history is empty).
    pub async fn last_event_seq(&self) -> Result<u64, StoreError> {
        self.run(|db| {
            let seq: Option<i64> = db
                .conn
                .prepare_cached("SELECT MAX(seq) FROM events")?
                .query_row(params![], |r| r.get(0))?;
            from_sql_int(seq.unwrap_or(0), "event seq")
        })
        .await
    }

    /// Deletes all but the newest `keep` events; returns how many were deleted.
    pub async fn prune_events(&self, keep: u64) -> Result<u64, StoreError> {
        self.run(move |db| {
            let deleted = db
                .conn
                .prepare_cached(
                    "DELETE FROM events WHERE seq <= (SELECT MAX(seq) FROM events) - ?1",
                )?
                .execute(params![to_sql_int(keep)])?;
            Ok(u64::try_from(deleted).unwrap_or(u64::MAX))
        })
        .await
    }
}
