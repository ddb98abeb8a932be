//! Session search: full-text search (FTS5, BM25) over the user and assistant messages and the
//! tool results (secrets already redacted) of every session an agent had.

use crate::error::StoreError;
use crate::memory::fts_query;
use crate::sql::params;
use crate::store::Store;
use serde::Serialize;

/// One message that matched, best first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionHit {
    pub session_id: String,
    pub seq: i64,
    pub role: String,
    /// For a tool result, the tool that gave it.
    pub tool: Option<String>,
    /// The message around the match, matched words in `[` `]`.
    pub snippet: String,
    pub created_at: String,
    /// BM25 relevance, higher is better.
    pub score: f64,
}

/// Session search on SQLite: the FTS5 index of messages, ranked by BM25.
const SQLITE_SEARCH: &str = "SELECT f.session_id, f.seq, m.role,
        snippet(messages_fts, 0, '[', ']', '…', 24), m.created_at,
        bm25(messages_fts) AS rank, m.tool_name
 FROM messages_fts f
 JOIN sessions s ON s.id = f.session_id
 JOIN messages m ON m.session_id = f.session_id AND m.seq = f.seq
 WHERE messages_fts MATCH ?1 AND s.agent = ?2
   AND (CAST(?3 AS TEXT) IS NULL OR m.created_at >= ?3)
 ORDER BY rank, m.created_at DESC
 LIMIT ?4";

/// Session search on PostgreSQL: each message's stored `tsvector`, ranked by `ts_rank_cd`
/// (negated, so lower is better as with BM25), the snippet cut by `ts_headline`.
const POSTGRES_SEARCH: &str = "SELECT m.session_id, m.seq, m.role,
        ts_headline('english', m.content, to_tsquery('english', ?1),
                    'StartSel=[, StopSel=], MaxWords=24, MinWords=8'),
        m.created_at,
        CAST(-ts_rank_cd(m.search, to_tsquery('english', ?1)) AS FLOAT8) AS rank, m.tool_name
 FROM messages m
 JOIN sessions s ON s.id = m.session_id
 WHERE m.search @@ to_tsquery('english', ?1) AND s.agent = ?2
   AND (CAST(?3 AS TEXT) IS NULL OR m.created_at >= ?3)
 ORDER BY rank, m.created_at DESC
 LIMIT ?4";

impl Store {
    /// Messages of `agent`'s sessions matching `text` (any of its words), best first; `since`
    /// keeps messages at or after a timestamp.
    pub async fn search_sessions(
        &self,
        agent: &str,
        text: &str,
        since: Option<String>,
        limit: usize,
    ) -> Result<Vec<SessionHit>, StoreError> {
        if agent.trim().is_empty() {
            return Err(StoreError::Invalid {
                field: "agent",
                message: "is empty".into(),
            });
        }
        let matcher = fts_query(text, false)?;
        let ts = crate::memory::ts_query(text, false)?;
        let agent = agent.to_owned();
        let limit = limit.clamp(1, 200) as i64;
        self.run(move |db| {
            let postgres = db.conn.dialect() == crate::sql::Dialect::Postgres;
            let (sql, matcher) = if postgres {
                (POSTGRES_SEARCH, ts)
            } else {
                (SQLITE_SEARCH, matcher)
            };
            let mut stmt = db.conn.prepare_cached(sql)?;
            let hits = stmt
                .query_map(params![matcher, agent, since, limit], |r| {
                    Ok(SessionHit {
                        session_id: r.get(0)?,
                        seq: r.get(1)?,
                        role: r.get(2)?,
                        tool: r.get(6)?,
                        snippet: r.get(3)?,
                        created_at: r.get(4)?,
                        score: -r.get::<f64>(5)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(hits)
        })
        .await
    }
}
