//! Compaction rows: recording which messages of a session its context replaced, and listing them.

use crate::error::StoreError;
use crate::sql::{Row, TransactionBehavior, params};
use crate::store::{Store, ensure_session, from_sql_int, last_seq, to_sql_int};
use reef_core::{CompactionStrategy, CompactionTrigger, SessionId};
use serde::Serialize;

/// A compaction to record; the store adds the session, `after_seq` and the timestamp.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NewCompaction {
    /// First replaced message (1-based, inclusive).
    pub from_seq: u64,
    /// Last replaced message (inclusive); at most the session's last message seq.
    pub to_seq: u64,
    pub strategy: CompactionStrategy,
    pub trigger: CompactionTrigger,
    /// What replaced the messages; `None` when they were dropped.
    pub summary: Option<String>,
    /// Estimated context size before and after, in tokens.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// The model's context window, in tokens.
    pub window: u64,
}

/// A compaction as stored.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompactionRecord {
    /// Increases with every compaction recorded in the store.
    pub id: u64,
    pub session_id: SessionId,
    /// The session's last message seq when this was recorded.
    pub after_seq: u64,
    pub from_seq: u64,
    pub to_seq: u64,
    pub strategy: CompactionStrategy,
    pub trigger: CompactionTrigger,
    pub summary: Option<String>,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub window: u64,
    /// RFC3339 UTC, millisecond precision.
    pub created_at: String,
}

impl Store {
    /// Records that messages `from_seq..=to_seq` of `session` are replaced in its context (by
    /// the summary, or dropped). `NotFound` for an unknown session; `Invalid` when `from_seq`
    /// is 0, `from_seq > to_seq`, or `to_seq` is beyond the session's last message. The
    /// messages themselves are kept.
    pub async fn record_compaction(
        &self,
        session: &SessionId,
        new: NewCompaction,
    ) -> Result<CompactionRecord, StoreError> {
        let session = session.clone();
        self.run(move |db| {
            // IMMEDIATE: the last seq checked against is the one the row is recorded with.
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            ensure_session(&tx, &session)?;
            let last = last_seq(&tx, &session)?;
            check_range(new.from_seq, new.to_seq, last, &session)?;
            let now = db.clock.now();
            let id: i64 = tx
                .prepare_cached(
                    "INSERT INTO compactions
                       (session_id, after_seq, from_seq, to_seq, strategy, trigger, summary,
                        tokens_before, tokens_after, \"window\", created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                     RETURNING id",
                )?
                .query_row(
                    params![
                        session.as_str(),
                        to_sql_int(last),
                        to_sql_int(new.from_seq),
                        to_sql_int(new.to_seq),
                        new.strategy.as_str(),
                        trigger_name(new.trigger),
                        new.summary,
                        to_sql_int(new.tokens_before),
                        to_sql_int(new.tokens_after),
                        to_sql_int(new.window),
                        now,
                    ],
                    |r| r.get(0),
                )?;
            tx.commit()?;
            Ok(CompactionRecord {
                id: from_sql_int(id, "compaction id")?,
                session_id: session,
                after_seq: last,
                from_seq: new.from_seq,
                to_seq: new.to_seq,
                strategy: new.strategy,
                trigger: new.trigger,
                summary: new.summary,
                tokens_before: new.tokens_before,
                tokens_after: new.tokens_after,
                window: new.window,
                created_at: now,
            })
        })
        .await
    }

    /// The session's compactions, oldest first. `NotFound` if the session does not exist.
    pub async fn compactions(
        &self,
        session: &SessionId,
    ) -> Result<Vec<CompactionRecord>, StoreError> {
        let session = session.clone();
        self.run(move |db| {
            let tx = db.conn.transaction()?;
            ensure_session(&tx, &session)?;
            let mut stmt = tx.prepare_cached(
                "SELECT id, after_seq, from_seq, to_seq, strategy, trigger, summary,
                        tokens_before, tokens_after, \"window\", created_at
                 FROM compactions WHERE session_id = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map(params![session.as_str()], CompactionRow::read)?;
            let mut out = Vec::new();
            for row in rows {
                out.push(row?.decode(&session)?);
            }
            Ok(out)
        })
        .await
    }
}

/// Refuses a replaced range that is empty, starts before seq 1, or ends past `last`.
fn check_range(from: u64, to: u64, last: u64, session: &SessionId) -> Result<(), StoreError> {
    if from == 0 {
        return Err(StoreError::Invalid {
            field: "from_seq",
            message: "message seqs start at 1".into(),
        });
    }
    if from > to {
        return Err(StoreError::Invalid {
            field: "to_seq",
            message: format!("{to} is before from_seq {from}"),
        });
    }
    if to > last {
        return Err(StoreError::Invalid {
            field: "to_seq",
            message: format!("{to} is beyond the last message ({last}) of session {session}"),
        });
    }
    Ok(())
}

/// How a trigger is stored: its serde (snake_case) name.
fn trigger_name(trigger: CompactionTrigger) -> &'static str {
    match trigger {
        CompactionTrigger::Threshold => "threshold",
        CompactionTrigger::ContextLengthError => "context_length_error",
        CompactionTrigger::Manual => "manual",
    }
}

/// The trigger stored as `name`; through serde, so a variant added to core is read back
/// without a change here (`trigger_name` stops compiling until it is written).
fn parse_trigger(name: &str) -> Option<CompactionTrigger> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

/// The column values of one compaction row, as read.
struct CompactionRow {
    id: i64,
    after_seq: i64,
    from_seq: i64,
    to_seq: i64,
    strategy: String,
    trigger: String,
    summary: Option<String>,
    tokens_before: i64,
    tokens_after: i64,
    window: i64,
    created_at: String,
}

impl CompactionRow {
    fn read(r: &Row<'_>) -> crate::sql::Result<CompactionRow> {
        Ok(CompactionRow {
            id: r.get(0)?,
            after_seq: r.get(1)?,
            from_seq: r.get(2)?,
            to_seq: r.get(3)?,
            strategy: r.get(4)?,
            trigger: r.get(5)?,
            summary: r.get(6)?,
            tokens_before: r.get(7)?,
            tokens_after: r.get(8)?,
            window: r.get(9)?,
            created_at: r.get(10)?,
        })
    }

    /// The record; a row that cannot be decoded is `Corrupt`, naming the row.
    fn decode(self, session: &SessionId) -> Result<CompactionRecord, StoreError> {
        let what = format!("compaction {} of session {session}", self.id);
        let int = |v: i64, field: &str| from_sql_int(v, &format!("{what}: {field}"));
        let strategy = CompactionStrategy::parse(&self.strategy).ok_or_else(|| {
            StoreError::Corrupt(format!("{what}: unknown strategy '{}'", self.strategy))
        })?;
        let trigger = parse_trigger(&self.trigger).ok_or_else(|| {
            StoreError::Corrupt(format!("{what}: unknown trigger '{}'", self.trigger))
        })?;
        Ok(CompactionRecord {
            id: int(self.id, "id")?,
            session_id: session.clone(),
            after_seq: int(self.after_seq, "after_seq")?,
            from_seq: int(self.from_seq, "from_seq")?,
            to_seq: int(self.to_seq, "to_seq")?,
            strategy,
            trigger,
            summary: self.summary,
            tokens_before: int(self.tokens_before, "tokens_before")?,
            tokens_after: int(self.tokens_after, "tokens_after")?,
            window: int(self.window, "window")?,
            created_at: self.created_at,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::*;

    #[test]
    fn trigger_names_match_serde() {
        for trigger in [
            CompactionTrigger::Threshold,
            CompactionTrigger::ContextLengthError,
            CompactionTrigger::Manual,
        ] {
            let json = serde_json::to_string(&trigger).unwrap();
            assert_eq!(json, format!("\"{}\"", trigger_name(trigger)));
            assert_eq!(parse_trigger(trigger_name(trigger)), Some(trigger));
        }
        assert_eq!(parse_trigger("Manual"), None);
    }
}
