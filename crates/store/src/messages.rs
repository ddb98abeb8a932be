//! Message rows: appending (one committed transaction each) and reading a transcript back.

use crate::codec::{MessageRow, title_from};
use crate::error::StoreError;
use crate::records::StoredMessage;
use crate::sql::{OptionalExtension, TransactionBehavior, params};
use crate::store::{Store, ensure_session, from_sql_int};
use reef_core::{Message, SessionId};

impl Store {
    /// Appends `message` as the session's next message (seq is 1-based and gap-free), bumps the
    /// session's `updated_at`, and titles the session from its first user message. The write is
    /// committed before this returns, so a crash afterwards cannot lose it.
    pub async fn append_message(
        &self,
        session: &SessionId,
        message: &Message,
    ) -> Result<StoredMessage, StoreError> {
        let session = session.clone();
        let message = message.clone();
        self.run(move |db| {
            let row = MessageRow::encode(&message)?;
            // IMMEDIATE takes the write lock up front, so reading MAX(seq) and inserting are one
            // atomic step even against other processes sharing the file.
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let title: Option<Option<String>> = tx
                .prepare_cached("SELECT title FROM sessions WHERE id = ?1")?
                .query_row(params![session.as_str()], |r| r.get(0))
                .optional()?;
            let Some(title) = title else {
                return Err(StoreError::NotFound(format!("session {session}")));
            };
            let now = db.clock.now();
            let seq: i64 = tx
                .prepare_cached(
                    "INSERT INTO messages
                   (session_id, seq, role, content, tool_calls, tool_call_id, tool_name, is_error,
                    created_at)
                 SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8
                   FROM messages WHERE session_id = ?1
                 RETURNING seq",
                )?
                .query_row(
                    params![
                        session.as_str(),
                        row.role,
                        row.content,
                        row.tool_calls,
                        row.tool_call_id,
                        row.tool_name,
                        row.is_error,
                        now,
                    ],
                    |r| r.get(0),
                )?;
            let new_title = match (&title, &message) {
                (None, Message::User { content }) => title_from(content),
                _ => None,
            };
            tx.prepare_cached(
                "UPDATE sessions SET updated_at = ?2, title = COALESCE(title, ?3) WHERE id = ?1",
            )?
            .execute(params![session.as_str(), now, new_title])?;
            tx.commit()?;
            Ok(StoredMessage {
                seq: from_sql_int(seq, "message seq")?,
                created_at: now,
                message,
            })
        })
        .await
    }

    /// The session's transcript in seq order. `NotFound` if the session does not exist.
    pub async fn messages(&self, session: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        self.messages_page(session, None, usize::MAX).await
    }

    /// Up to `limit` of the session's last messages before seq `before` (all when `None`),
    /// in seq order: a long transcript is read from its end, a page at a time.
    /// `NotFound` if the session does not exist.
    pub async fn messages_page(
        &self,
        session: &SessionId,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let session = session.clone();
        let before = before.map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |db| {
            let tx = db.conn.transaction()?;
            ensure_session(&tx, &session)?;
            let mut stmt = tx.prepare_cached(
                "SELECT seq, created_at, role, content, tool_calls, tool_call_id, tool_name,
                        is_error
                 FROM messages WHERE session_id = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
            )?;
            let rows = stmt.query_map(params![session.as_str(), before, limit], |r| {
                Ok((
                    r.get::<i64>(0)?,
                    r.get::<String>(1)?,
                    MessageRow {
                        role: r.get(2)?,
                        content: r.get(3)?,
                        tool_calls: r.get(4)?,
                        tool_call_id: r.get(5)?,
                        tool_name: r.get(6)?,
                        is_error: r.get(7)?,
                    },
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, created_at, row) = row?;
                let what = format!("message {seq} of session {session}");
                out.push(StoredMessage {
                    seq: from_sql_int(seq, &what)?,
                    created_at,
                    message: row.decode(&what)?,
                });
            }
            drop(stmt);
            out.reverse();
            Ok(out)
        })
        .await
    }
}
