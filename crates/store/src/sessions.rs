//! Session rows: creating, forking, fetching, listing and resolving id prefixes.

use crate::error::StoreError;
use crate::records::{NewSession, SessionRecord, SessionSummary};
use crate::sql::{OptionalExtension, Row, TransactionBehavior, params};
use crate::store::{Store, from_sql_int, last_seq, to_sql_int};
use reef_core::SessionId;

impl Store {
    /// Inserts a new session with no title; `created_at == updated_at`.
    pub async fn create_session(&self, new: NewSession) -> Result<SessionRecord, StoreError> {
        self.run(move |db| {
            let now = db.clock.now();
            db.conn.prepare_cached("INSERT INTO sessions (id, title, workspace, provider, model, created_at, updated_at, agent)
                 VALUES (?1, NULL, ?2, ?3, ?4, ?5, ?5, ?6)")?.execute(params![new.id.as_str(), new.workspace, new.provider, new.model, now, new.agent],
            )?;
            Ok(SessionRecord {
                id: new.id,
                title: None,
                workspace: new.workspace,
                provider: new.provider,
                model: new.model,
                created_at: now.clone(),
                updated_at: now,
            })
        })
        .await
    }

    /// A new session (`new.id`, its own agent/workspace/provider/model fields) holding a copy
    /// of `source`'s messages `1..=upto_seq` (same seqs, contents and timestamps) and of the
    /// compactions whose `to_seq <= upto_seq`, oldest first; its title is the source's title.
    /// Copied compactions get new ids, and an `after_seq` of at most `upto_seq` (the fork's
    /// last message when it was made). The source is not changed. `NotFound` when `source`
    /// does not exist; `Invalid` when `upto_seq` is 0 or beyond its last message; `Conflict`
    /// when a session `new.id` already exists.
    pub async fn fork_session(
        &self,
        source: &SessionId,
        upto_seq: u64,
        new: NewSession,
    ) -> Result<SessionRecord, StoreError> {
        let source = source.clone();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let title: Option<Option<String>> = tx
                .prepare_cached("SELECT title FROM sessions WHERE id = ?1")?
                .query_row(params![source.as_str()], |r| r.get(0))
                .optional()?;
            let Some(title) = title else {
                return Err(StoreError::NotFound(format!("session {source}")));
            };
            let last = last_seq(&tx, &source)?;
            if upto_seq == 0 || upto_seq > last {
                return Err(StoreError::Invalid {
                    field: "upto_seq",
                    message: format!(
                        "{upto_seq} is not a message of session {source} (it has 1..={last})"
                    ),
                });
            }
            let taken: Option<i64> = tx
                .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
                .query_row(params![new.id.as_str()], |r| r.get(0))
                .optional()?;
            if taken.is_some() {
                return Err(StoreError::Conflict(format!(
                    "session {} already exists; fork into a new id",
                    new.id
                )));
            }
            let now = db.clock.now();
            let upto = to_sql_int(upto_seq);
            tx.prepare_cached(
                "INSERT INTO sessions
                   (id, title, workspace, provider, model, created_at, updated_at, agent)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
            )?
            .execute(params![
                new.id.as_str(),
                title,
                new.workspace,
                new.provider,
                new.model,
                now,
                new.agent
            ])?;
            tx.prepare_cached(
                "INSERT INTO messages
                   (session_id, seq, role, content, tool_calls, tool_call_id, tool_name, is_error,
                    created_at)
                 SELECT ?1, seq, role, content, tool_calls, tool_call_id, tool_name, is_error,
                        created_at
                   FROM messages WHERE session_id = ?2 AND seq <= ?3 ORDER BY seq",
            )?
            .execute(params![new.id.as_str(), source.as_str(), upto])?;
            tx.prepare_cached(
                "INSERT INTO compactions
                   (session_id, after_seq, from_seq, to_seq, strategy, trigger, summary,
                    tokens_before, tokens_after, \"window\", created_at)
                 SELECT ?1, CASE WHEN after_seq < ?3 THEN after_seq ELSE ?3 END, from_seq, to_seq, strategy, trigger, summary,
                        tokens_before, tokens_after, \"window\", created_at
                   FROM compactions WHERE session_id = ?2 AND to_seq <= ?3 ORDER BY id",
            )?
            .execute(params![new.id.as_str(), source.as_str(), upto])?;
            tx.commit()?;
            Ok(SessionRecord {
                id: new.id,
                title,
                workspace: new.workspace,
                provider: new.provider,
                model: new.model,
                created_at: now.clone(),
                updated_at: now,
            })
        })
        .await
    }

    /// The session with exactly this id, if any.
    pub async fn get_session(&self, id: &SessionId) -> Result<Option<SessionRecord>, StoreError> {
        let id = id.clone();
        self.run(move |db| {
            Ok(db
                .conn
                .prepare_cached(
                    "SELECT id, title, workspace, provider, model, created_at, updated_at
                     FROM sessions WHERE id = ?1",
                )?
                .query_row(params![id.as_str()], session_record)
                .optional()?)
        })
        .await
    }

    /// Up to `limit` sessions, most recently updated first, with message counts and token sums.
    pub async fn list_sessions(&self, limit: usize) -> Result<Vec<SessionSummary>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |db| {
            let mut stmt = db.conn.prepare(
                "SELECT s.id, s.title, s.provider, s.model, s.created_at, s.updated_at,
                        (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id),
                        (SELECT COALESCE(SUM(u.input_tokens), 0) FROM model_usage u
                          WHERE u.session_id = s.id),
                        (SELECT COALESCE(SUM(u.output_tokens), 0) FROM model_usage u
                          WHERE u.session_id = s.id)
                 FROM sessions s
                 ORDER BY s.updated_at DESC, s.id DESC
                 LIMIT ?1",
            )?;
            let rows = stmt.query_map(params![limit], |r| {
                Ok((
                    SessionId::from_string(r.get::<String>(0)?),
                    r.get::<Option<String>>(1)?,
                    r.get::<String>(2)?,
                    r.get::<String>(3)?,
                    r.get::<String>(4)?,
                    r.get::<String>(5)?,
                    r.get::<i64>(6)?,
                    r.get::<i64>(7)?,
                    r.get::<i64>(8)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (id, title, provider, model, created_at, updated_at, count, input, output) =
                    row?;
                let what = format!("session {id}");
                out.push(SessionSummary {
                    message_count: from_sql_int(count, &format!("{what} message count"))?,
                    input_tokens: from_sql_int(input, &format!("{what} input tokens"))?,
                    output_tokens: from_sql_int(output, &format!("{what} output tokens"))?,
                    id,
                    title,
                    provider,
                    model,
                    created_at,
                    updated_at,
                });
            }
            Ok(out)
        })
        .await
    }

    /// The session whose id is `prefix` exactly, or the only one starting with it.
    /// `NotFound` if none match, `Ambiguous` if several do.
    pub async fn resolve_session(&self, prefix: &str) -> Result<SessionId, StoreError> {
        let prefix = prefix.trim().to_owned();
        self.run(move |db| {
            let not_found = || StoreError::NotFound(format!("no session matches '{prefix}'"));
            if prefix.is_empty() {
                return Err(not_found());
            }
            let exact: Option<String> = db
                .conn
                .prepare_cached("SELECT id FROM sessions WHERE id = ?1")?
                .query_row(params![prefix], |r| r.get(0))
                .optional()?;
            if let Some(id) = exact {
                return Ok(SessionId::from_string(id));
            }
            // substr, not LIKE: '_' and '%' in a prefix are literal characters.
            let mut stmt = db.conn.prepare(
                "SELECT id FROM sessions WHERE substr(id, 1, length(CAST(?1 AS TEXT))) = ?1 ORDER BY id",
            )?;
            let ids = stmt
                .query_map(params![prefix], |r| r.get::<String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            match ids.as_slice() {
                [] => Err(not_found()),
                [one] => Ok(SessionId::from_string(one.clone())),
                many => Err(StoreError::Ambiguous {
                    prefix: prefix.clone(),
                    matches: many.len(),
                }),
            }
        })
        .await
    }
}

fn session_record(r: &Row<'_>) -> crate::sql::Result<SessionRecord> {
    Ok(SessionRecord {
        id: SessionId::from_string(r.get::<String>(0)?),
        title: r.get(1)?,
        workspace: r.get(2)?,
        provider: r.get(3)?,
        model: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
    })
}
