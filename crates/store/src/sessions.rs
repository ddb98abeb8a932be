//! Session rows: creating, fetching, listing and resolving id prefixes.

use crate::error::StoreError;
use crate::records::{NewSession, SessionRecord, SessionSummary};
use crate::store::{Store, from_sql_int};
use reef_core::SessionId;
use rusqlite::{OptionalExtension, Row, params};

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
                 ORDER BY s.updated_at DESC, s.rowid DESC
                 LIMIT ?1",
            )?;
            let rows = stmt.query_map(params![limit], |r| {
                Ok((
                    SessionId::from_string(r.get::<_, String>(0)?),
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, i64>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, i64>(8)?,
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
                "SELECT id FROM sessions WHERE substr(id, 1, length(?1)) = ?1 ORDER BY id",
            )?;
            let ids = stmt
                .query_map(params![prefix], |r| r.get::<_, String>(0))?
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

fn session_record(r: &Row<'_>) -> rusqlite::Result<SessionRecord> {
    Ok(SessionRecord {
        id: SessionId::from_string(r.get::<_, String>(0)?),
        title: r.get(1)?,
        workspace: r.get(2)?,
        provider: r.get(3)?,
        model: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
    })
}
