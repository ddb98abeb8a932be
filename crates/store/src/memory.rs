//! Long-term memory: items in a namespace (`agent:NAME` private to one agent, `shared` for
//! all), split into overlapping chunks and searched by keyword (FTS5, BM25 ranking) with
//! namespace, tag and time filters. Which namespaces a caller may read or write is decided by
//! the caller (the tools and the CLI); the store only filters by what it is given.

use crate::chunk::chunks;
use crate::error::StoreError;
use crate::sql::{OptionalExtension, TransactionBehavior, params};
use crate::store::Store;
use serde::Serialize;
use std::sync::{Mutex, PoisonError};

/// The namespace every agent may read.
pub const SHARED_NAMESPACE: &str = "shared";

/// How documents are split: about `size` characters per chunk, `overlap` shared with the
/// previous chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunking {
    pub size: usize,
    pub overlap: usize,
}

impl Default for Chunking {
    fn default() -> Self {
        Self {
            size: 800,
            overlap: 100,
        }
    }
}

/// A memory to store.
#[derive(Clone, Debug, Default)]
pub struct NewMemory {
    pub namespace: String,
    pub text: String,
    pub tags: Vec<String>,
    /// Where it came from (a file path, a session id, "operator").
    pub source: Option<String>,
}

/// A stored memory item.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryItem {
    pub id: i64,
    pub namespace: String,
    pub text: String,
    pub tags: Vec<String>,
    pub source: Option<String>,
    pub chunks: usize,
    pub created_at: String,
    pub updated_at: String,
}

/// A keyword search.
#[derive(Clone, Debug, Default)]
pub struct MemoryQuery {
    /// Namespaces searched (at least one).
    pub namespaces: Vec<String>,
    pub text: String,
    /// Every one of these tags must be on the item.
    pub tags: Vec<String>,
    /// Only items created at or after this timestamp (the store's format).
    pub since: Option<String>,
    pub limit: usize,
    /// Only chunks holding every word (the default: any of them, ranked by BM25).
    pub every_word: bool,
}

/// One matching chunk, best first.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct MemoryHit {
    pub item_id: i64,
    pub chunk_id: i64,
    pub namespace: String,
    /// The matching chunk's text.
    pub text: String,
    pub tags: Vec<String>,
    pub source: Option<String>,
    pub created_at: String,
    /// BM25 relevance, higher is better.
    pub score: f64,
}

/// Checks a namespace name: `shared` or `agent:NAME`.
pub fn check_namespace(namespace: &str) -> Result<(), StoreError> {
    let valid = namespace == SHARED_NAMESPACE
        || namespace
            .strip_prefix("agent:")
            .is_some_and(|name| !name.is_empty() && !name.contains(char::is_whitespace));
    if valid {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            field: "namespace",
            message: format!("`{namespace}` is neither `shared` nor `agent:NAME`"),
        })
    }
}

/// English words too common to rank by: a query's keyword side ignores them (unless the query
/// has nothing else), so "when is our meeting" ranks by "meeting", not by "is".
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing", "for",
    "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i",
    "if", "in", "into", "is", "it", "its", "just", "me", "my", "no", "nor", "not", "now", "of",
    "off", "on", "once", "only", "or", "our", "ours", "out", "over", "own", "she", "should", "so",
    "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they",
    "this", "those", "to", "too", "up", "us", "very", "was", "we", "were", "what", "when", "where",
    "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// How far [`Store::document_counts`] counts one word.
pub(crate) const DOCUMENT_COUNT_CAP: i64 = 5000;

/// Whether `lower` (lower-cased) is a stopword, left out of keyword queries.
pub(crate) fn is_stopword(lower: &str) -> bool {
    STOPWORDS.contains(&lower)
}

/// The FTS5 query for free text: each word quoted (so operators in the text are literal), any
/// of them matching; stopwords are left out when other words remain.
pub(crate) fn fts_query(text: &str, every_word: bool) -> Result<String, StoreError> {
    Ok(query_words(text)?
        .iter()
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(if every_word { " AND " } else { " OR " }))
}

/// The same query for PostgreSQL's `to_tsquery('english', …)`: the same words, lower-cased
/// (they are letters and digits only, so never an operator), joined by `|` or `&`.
pub(crate) fn ts_query(text: &str, every_word: bool) -> Result<String, StoreError> {
    Ok(query_words(text)?
        .iter()
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>()
        .join(if every_word { " & " } else { " | " }))
}

/// The words a keyword search looks for: the query's words without stopwords (all of them
/// when every word is one).
fn query_words(text: &str) -> Result<Vec<&str>, StoreError> {
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() {
        return Err(StoreError::Invalid {
            field: "query",
            message: "has no words to search for".into(),
        });
    }
    let content: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| !STOPWORDS.contains(&w.to_lowercase().as_str()))
        .collect();
    Ok(if content.is_empty() { words } else { content })
}

/// A list as JSON text, for `json_each` in SQL.
pub(crate) fn json_list<T: Serialize>(values: &[T]) -> Result<String, StoreError> {
    serde_json::to_string(values).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Checks the namespaces a search covers: at least one, each well-formed.
pub(crate) fn check_search_namespaces(namespaces: &[String]) -> Result<(), StoreError> {
    if namespaces.is_empty() {
        return Err(StoreError::Invalid {
            field: "namespaces",
            message: "name at least one namespace to search".into(),
        });
    }
    namespaces.iter().try_for_each(|ns| check_namespace(ns))
}

pub(crate) fn parse_tags(raw: &str) -> Vec<String> {
    serde_json::from_str(raw).unwrap_or_default()
}

/// A hit from a row whose first seven columns are the chunk's item id, id, namespace, text,
/// tags, source and creation time (every memory search selects them so), with `score`.
pub(crate) fn hit_from_row(r: &crate::sql::Row<'_>, score: f64) -> crate::sql::Result<MemoryHit> {
    Ok(MemoryHit {
        item_id: r.get(0)?,
        chunk_id: r.get(1)?,
        namespace: r.get(2)?,
        text: r.get(3)?,
        tags: parse_tags(&r.get::<String>(4)?),
        source: r.get(5)?,
        created_at: r.get(6)?,
        score,
    })
}

impl Store {
    /// Stores a memory and its chunks in one transaction.
    pub async fn add_memory(
        &self,
        memory: NewMemory,
        chunking: Chunking,
    ) -> Result<MemoryItem, StoreError> {
        check_namespace(&memory.namespace)?;
        if memory.text.trim().is_empty() {
            return Err(StoreError::Invalid {
                field: "text",
                message: "is empty".into(),
            });
        }
        if chunking.size < 16 || chunking.overlap >= chunking.size {
            return Err(StoreError::Invalid {
                field: "chunking",
                message: format!(
                    "size {} must be at least 16 and overlap {} below it",
                    chunking.size, chunking.overlap
                ),
            });
        }
        let parts = chunks(&memory.text, chunking.size, chunking.overlap);
        let tags = json_list(&memory.tags)?;
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let id: i64 = tx
                .prepare_cached(
                    "INSERT INTO memory_items (namespace, text, tags, source, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?5) RETURNING id",
                )?
                .query_row(
                    params![memory.namespace, memory.text, tags, memory.source, now],
                    |r| r.get(0),
                )?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO memory_chunks (item_id, ordinal, text) VALUES (?1, ?2, ?3)",
                )?;
                for (ordinal, part) in parts.iter().enumerate() {
                    insert.execute(params![id, ordinal as i64, part])?;
                }
            }
            tx.commit()?;
            Ok(MemoryItem {
                id,
                namespace: memory.namespace,
                text: memory.text,
                tags: memory.tags,
                source: memory.source,
                chunks: parts.len(),
                created_at: now.clone(),
                updated_at: now,
            })
        })
        .await
    }

    /// Chunks matching the query's words in the given namespaces, best (BM25) first.
    pub async fn search_memory(&self, query: MemoryQuery) -> Result<Vec<MemoryHit>, StoreError> {
        check_search_namespaces(&query.namespaces)?;
        let matcher = fts_query(&query.text, query.every_word)?;
        let ts = ts_query(&query.text, query.every_word)?;
        let namespaces = json_list(&query.namespaces)?;
        let tags = json_list(&query.tags)?;
        let limit = query.limit.clamp(1, 1000) as i64;
        self.read(move |conn| {
            let postgres = conn.dialect() == crate::sql::Dialect::Postgres;
            // The same query over PostgreSQL's `tsvector` column, ranked by `ts_rank_cd`
            // (higher is better, as SQLite's negated BM25 is).
            let (top, matched, score, matcher) = if postgres {
                (
                    "SELECT c.id, ts_rank_cd(c.search, to_tsquery('english', ?1)) AS score
                     FROM memory_chunks c WHERE c.search @@ to_tsquery('english', ?1)
                     ORDER BY score DESC LIMIT ?6",
                    "SELECT count(*) FROM (SELECT c.id FROM memory_chunks c
                      WHERE c.search @@ to_tsquery('english', ?1) LIMIT ?2) AS matched",
                    "top.score DESC",
                    ts,
                )
            } else {
                (
                    "SELECT rowid AS id, bm25(memory_fts) AS score FROM memory_fts
                     WHERE memory_fts MATCH ?1 ORDER BY score LIMIT ?6",
                    "SELECT count(*) FROM (SELECT rowid FROM memory_fts
                                           WHERE memory_fts MATCH ?1 LIMIT ?2) AS matched",
                    "top.score",
                    matcher,
                )
            };
            // FTS5 ranks every match; joining and filtering only the best `window` of them keeps
            // a query for common words cheap. When the filters leave fewer than `limit` of a
            // full window, the window grows until it holds every match. Ordering by `bm25()`
            // itself (the value of the hidden `rank` column) lets SQLite keep a top-`window`
            // heap; `ORDER BY rank` runs FTS5's own sort of every match, measured a quarter
            // to a third slower for three-word queries at 100,000 chunks.
            let mut window = (limit * 8).max(64);
            loop {
                let mut stmt = conn.prepare_cached(&format!(
                    "WITH top AS ({top})
                     SELECT c.item_id, c.id, i.namespace, c.text, i.tags, i.source,
                            i.created_at, top.score
                     FROM top
                     JOIN memory_chunks c ON c.id = top.id
                     JOIN memory_items i ON i.id = c.item_id
                     WHERE i.namespace IN (SELECT value FROM json_each(?2))
                       AND (CAST(?3 AS TEXT) IS NULL OR i.created_at >= ?3)
                       AND NOT EXISTS (SELECT 1 FROM json_each(?4) want
                                       WHERE want.value NOT IN (SELECT value FROM json_each(i.tags)))
                     ORDER BY {score}, c.id
                     LIMIT ?5"
                ))?;
                let hits = stmt
                    .query_map(
                        params![matcher, namespaces, query.since, tags, limit, window],
                        |r| {
                            let score = r.get::<f64>(7)?;
                            // BM25 is lower for better matches; ts_rank_cd higher.
                            hit_from_row(r, if postgres { score } else { -score })
                        },
                    )?
                    .collect::<Result<Vec<_>, _>>()?;
                if hits.len() as i64 >= limit || window == i64::MAX {
                    return Ok(hits);
                }
                let matches: i64 = conn
                    .prepare_cached(matched)?
                    .query_row(params![matcher, window], |r| r.get(0))?;
                if matches < window {
                    return Ok(hits);
                }
                window = window.saturating_mul(8);
            }
        })
        .await
    }

    /// About how many chunks memory holds, and how many hold each of `words` (each counted up to
    /// [`DOCUMENT_COUNT_CAP`]: past it a word is common, and exactly how common hardly moves
    /// its weight).
    /// Counts are remembered until a chunk is added (by any process) or deleted through this
    /// store; a deletion by another process shows once a chunk is next added.
    pub async fn document_counts(&self, words: Vec<String>) -> Result<(u64, Vec<u64>), StoreError> {
        let cache = self.word_counts();
        self.read(move |conn| {
            // The highest chunk id stands for the count (ids only grow; a deleted chunk
            // leaves a gap): one step down the index instead of a scan.
            let total: i64 = conn
                .prepare_cached("SELECT coalesce(max(id), 0) FROM memory_chunks")?
                .query_row(params![], |r| r.get(0))?;
            let mut counts = Vec::with_capacity(words.len());
            let postgres = conn.dialect() == crate::sql::Dialect::Postgres;
            let mut stmt = conn.prepare_cached(if postgres {
                "SELECT count(*) FROM (SELECT id FROM memory_chunks
                                       WHERE search @@ to_tsquery('english', ?1) LIMIT ?2) AS m"
            } else {
                "SELECT count(*) FROM (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?1
                                       LIMIT ?2)"
            })?;
            for word in &words {
                let known = lock_counts(&cache).get(total, word);
                let count = match known {
                    Some(count) => count,
                    None => {
                        // Quoted, so the word is a term and never an FTS5 operator; for
                        // PostgreSQL, letters and digits only, so never a tsquery operator.
                        let term = if postgres {
                            word.chars()
                                .filter(|c| c.is_alphanumeric())
                                .collect::<String>()
                                .to_lowercase()
                        } else {
                            format!("\"{}\"", word.replace('"', ""))
                        };
                        if term.is_empty() {
                            counts.push(0);
                            continue;
                        }
                        let count: i64 =
                            stmt.query_row(params![term, DOCUMENT_COUNT_CAP], |r| r.get(0))?;
                        let count = u64::try_from(count).unwrap_or(0);
                        lock_counts(&cache).put(total, word, count);
                        count
                    }
                };
                counts.push(count);
            }
            Ok((u64::try_from(total).unwrap_or(0), counts))
        })
        .await
    }

    /// The newest items of the given namespaces.
    pub async fn list_memory(
        &self,
        namespaces: Vec<String>,
        limit: usize,
    ) -> Result<Vec<MemoryItem>, StoreError> {
        for ns in &namespaces {
            check_namespace(ns)?;
        }
        let namespaces = json_list(&namespaces)?;
        let limit = limit.clamp(1, 10_000) as i64;
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(
                "SELECT i.id, i.namespace, i.text, i.tags, i.source, i.created_at, i.updated_at,
                        (SELECT count(*) FROM memory_chunks c WHERE c.item_id = i.id)
                 FROM memory_items i
                 WHERE i.namespace IN (SELECT value FROM json_each(?1))
                 ORDER BY i.created_at DESC, i.id DESC
                 LIMIT ?2",
            )?;
            let items = stmt
                .query_map(params![namespaces, limit], |r| {
                    Ok(MemoryItem {
                        id: r.get(0)?,
                        namespace: r.get(1)?,
                        text: r.get(2)?,
                        tags: parse_tags(&r.get::<String>(3)?),
                        source: r.get(4)?,
                        created_at: r.get(5)?,
                        updated_at: r.get(6)?,
                        chunks: r.get::<i64>(7)? as usize,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(items)
        })
        .await
    }

    /// Deletes item `id` if it lives in one of `namespaces`; false when there is no such item
    /// there (another namespace's item is never touched).
    pub async fn forget_memory(
        &self,
        namespaces: Vec<String>,
        id: i64,
    ) -> Result<bool, StoreError> {
        for ns in &namespaces {
            check_namespace(ns)?;
        }
        let namespaces = json_list(&namespaces)?;
        let word_counts = self.word_counts();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let found: Option<i64> = tx
                .prepare_cached(
                    "SELECT id FROM memory_items
                     WHERE id = ?1 AND namespace IN (SELECT value FROM json_each(?2))",
                )?
                .query_row(params![id, namespaces], |r| r.get(0))
                .optional()?;
            if found.is_none() {
                return Ok(false);
            }
            let chunk_ids = tx
                .prepare_cached("SELECT id FROM memory_chunks WHERE item_id = ?1")?
                .query_map(params![id], |r| r.get::<i64>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            // Chunks go first so their FTS rows are removed by the delete trigger.
            tx.prepare_cached("DELETE FROM memory_chunks WHERE item_id = ?1")?
                .execute(params![id])?;
            tx.prepare_cached("DELETE FROM memory_items WHERE id = ?1")?
                .execute(params![id])?;
            tx.commit()?;
            lock_counts(&word_counts).clear();
            if let Some(index) = crate::vectors::write_index(&db.vectors).as_mut() {
                index.remove(&chunk_ids);
            }
            Ok(true)
        })
        .await
    }
}

impl Store {
    /// The item of `namespace` imported from `source`, as (id, text), if there is one.
    pub async fn memory_by_source(
        &self,
        namespace: &str,
        source: &str,
    ) -> Result<Option<(i64, String)>, StoreError> {
        check_namespace(namespace)?;
        let (namespace, source) = (namespace.to_owned(), source.to_owned());
        self.run(move |db| {
            Ok(db
                .conn
                .prepare_cached(
                    "SELECT id, text FROM memory_items WHERE namespace = ?1 AND source = ?2
                     ORDER BY id DESC LIMIT 1",
                )?
                .query_row(params![namespace, source], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?)
        })
        .await
    }
}

/// The word-count cache, usable after a panic elsewhere (it holds only counts).
fn lock_counts(
    cache: &Mutex<crate::word_counts::WordCounts>,
) -> std::sync::MutexGuard<'_, crate::word_counts::WordCounts> {
    cache.lock().unwrap_or_else(PoisonError::into_inner)
}
