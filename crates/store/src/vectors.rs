//! Vector search over memory chunks: each chunk's unit vector is stored next to it (with the id
//! of the embedder that made it) and, for searching, held in RAM as one contiguous matrix that
//! is scanned exactly — a dot product per chunk, keeping the best k. The matrix is loaded on
//! the first search, kept in step with this process's writes, and reloaded when another process
//! changed the vectors. On PostgreSQL with pgvector, `vectors_pgvector` does both in the
//! database instead.

use crate::error::StoreError;
use crate::memory::{MemoryHit, check_search_namespaces, hit_from_row, json_list};
use crate::sql::{Dialect, TransactionBehavior, params};
use crate::store::{Db, Store};
use crate::vector_index::{Scan, VectorMatrix};
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A vector search.
#[derive(Clone, Debug, Default)]
pub struct VectorQuery {
    pub namespaces: Vec<String>,
    /// `Embedder::id` of the model that made `vector`; only chunks embedded by it are compared.
    pub embedder: String,
    pub vector: Vec<f32>,
    pub tags: Vec<String>,
    pub since: Option<String>,
    pub limit: usize,
    /// Exact, quantised, or chosen by size (the default).
    pub scan: Scan,
}

/// How many chunks have a vector from an embedder, of how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct VectorCoverage {
    pub embedded: u64,
    pub chunks: u64,
}

/// The in-RAM matrix of one embedder's vectors, shared by the store's clones: a search scans
/// it under a read lock without holding the connection, so the keyword side of a hybrid
/// search runs beside it.
pub(crate) type SharedIndex = Arc<RwLock<Option<VectorIndex>>>;

/// The ids of the chunks without a vector from embedder `?1`, as a `pending` table: three
/// index ranges on `embedder` (NULL, below, above), materialised first and driving the joins
/// that follow (CROSS JOIN fixes the order), so a store whose chunks are all embedded
/// answers from the index without reading a row.
macro_rules! pending_chunks {
    () => {
        "WITH pending AS MATERIALIZED (
             SELECT id FROM memory_chunks WHERE embedder IS NULL
             UNION ALL SELECT id FROM memory_chunks WHERE embedder < ?1
             UNION ALL SELECT id FROM memory_chunks WHERE embedder > ?1)
         "
    };
}

/// How often this store's vector index was read whole from the database, and how often it
/// caught up with another connection's writes by reading only what changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VectorLoads {
    pub full: u64,
    pub incremental: u64,
}

/// One embedder's vectors and what tells whether they are still the database's.
pub(crate) struct VectorIndex {
    embedder: String,
    matrix: VectorMatrix,
    namespaces: Vec<String>,
    /// `PRAGMA data_version` when loaded: it changes when another connection commits.
    data_version: i64,
    /// Count, max and sum of the chunk ids with vectors, to tell whether a foreign commit
    /// touched them.
    signature: (i64, i64, i64),
}

impl VectorIndex {
    fn namespace_index(&mut self, namespace: &str) -> u32 {
        match self.namespaces.iter().position(|n| n == namespace) {
            Some(i) => i as u32,
            None => {
                self.namespaces.push(namespace.to_owned());
                (self.namespaces.len() - 1) as u32
            }
        }
    }

    fn push(&mut self, chunk_id: i64, namespace: &str, vector: &[f32]) {
        let ns = self.namespace_index(namespace);
        self.matrix.push(chunk_id, ns, vector);
    }

    /// Drops the rows of `chunk_ids`.
    pub(crate) fn remove(&mut self, chunk_ids: &[i64]) {
        self.matrix.remove(chunk_ids);
    }
}

/// The index of `db`, poisoned or not (a panic while it was held leaves whole rows).
pub(crate) fn write_index(index: &SharedIndex) -> RwLockWriteGuard<'_, Option<VectorIndex>> {
    index.write().unwrap_or_else(PoisonError::into_inner)
}

fn read_index(index: &SharedIndex) -> RwLockReadGuard<'_, Option<VectorIndex>> {
    index.read().unwrap_or_else(PoisonError::into_inner)
}

/// The dot product, written with 16 independent sums so the compiler vectorises it.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut sums = [0f32; LANES];
    let (a_main, a_rest) = a.split_at(a.len() / LANES * LANES);
    let (b_main, b_rest) = b.split_at(a_main.len().min(b.len()));
    for (x, y) in a_main.chunks_exact(LANES).zip(b_main.chunks_exact(LANES)) {
        for i in 0..LANES {
            sums[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    sums.iter().sum::<f32>() + tail
}

pub(crate) fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn from_blob(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn signature(db: &Db, embedder: &str) -> crate::sql::Result<(i64, i64, i64)> {
    db.conn
        .prepare_cached(
            "SELECT count(*), coalesce(max(id), 0), CAST(coalesce(sum(id), 0) AS BIGINT)
             FROM memory_chunks WHERE embedder = ?1",
        )?
        .query_row(params![embedder], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
}

/// A number that changes when another connection commits (SQLite's `data_version`; on
/// PostgreSQL the write-ahead log's position, which any commit moves).
fn data_version(db: &Db) -> crate::sql::Result<i64> {
    let sql = match db.conn.dialect() {
        Dialect::Sqlite => "PRAGMA data_version",
        Dialect::Postgres => "SELECT CAST(pg_current_wal_lsn() - '0/0' AS BIGINT)",
    };
    db.conn.query_row(sql, params![], |r| r.get(0))
}

/// Makes `db.vectors` hold `embedder`'s vectors as the database has them: loading them when it
/// holds another embedder's or nothing; when another process committed since, reading only
/// the rows added (and dropping the rows gone) rather than everything again.
fn ensure_loaded(db: &mut Db, embedder: &str) -> Result<(), StoreError> {
    let version = data_version(db)?;
    let shared = Arc::clone(&db.vectors);
    let mut guard = write_index(&shared);
    if let Some(index) = guard.as_mut()
        && index.embedder == embedder
    {
        if index.data_version == version {
            return Ok(());
        }
        let now = signature(db, embedder)?;
        index.data_version = version;
        if index.signature == now {
            return Ok(());
        }
        if catch_up(db, index, now)? {
            db.vector_loads.incremental += 1;
            return Ok(());
        }
    }
    let mut index = VectorIndex {
        embedder: embedder.to_owned(),
        matrix: VectorMatrix::new(0),
        namespaces: Vec::new(),
        data_version: version,
        signature: signature(db, embedder)?,
    };
    add_rows(db, &mut index, 0)?;
    *guard = Some(index);
    db.vector_loads.full += 1;
    Ok(())
}

/// Brings `index` to the database's `now` signature by reading the rows with ids above its
/// last and dropping the ones no longer there; false when that does not account for the
/// change (older rows embedded again), which calls for a full load.
fn catch_up(db: &Db, index: &mut VectorIndex, now: (i64, i64, i64)) -> Result<bool, StoreError> {
    let last = index.signature.1;
    add_rows(db, index, last)?;
    let mut have = signature_of(index.matrix.ids());
    if have.0 > now.0 {
        let ids: std::collections::HashSet<i64> = db
            .conn
            .prepare_cached("SELECT id FROM memory_chunks WHERE embedder = ?1")?
            .query_map(params![index.embedder], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let gone: Vec<i64> = index
            .matrix
            .ids()
            .iter()
            .copied()
            .filter(|id| !ids.contains(id))
            .collect();
        index.remove(&gone);
        have = signature_of(index.matrix.ids());
    }
    index.signature = have;
    Ok(have == now)
}

/// Count, max and sum of ids, as [`signature`] computes them in SQL.
fn signature_of(ids: &[i64]) -> (i64, i64, i64) {
    (
        ids.len() as i64,
        ids.iter().copied().max().unwrap_or(0),
        ids.iter().sum(),
    )
}

/// Appends `embedder`'s vectors of chunks with ids above `after`, in id order.
fn add_rows(db: &Db, index: &mut VectorIndex, after: i64) -> Result<(), StoreError> {
    let mut stmt = db.conn.prepare_cached(
        "SELECT c.id, i.namespace, c.embedding FROM memory_chunks c
         JOIN memory_items i ON i.id = c.item_id
         WHERE c.embedder = ?1 AND c.embedding IS NOT NULL AND c.id > ?2
         ORDER BY c.id",
    )?;
    let embedder = index.embedder.clone();
    stmt.for_each(params![embedder, after], |row| {
        let id: i64 = row.get(0)?;
        let namespace: String = row.get(1)?;
        let blob: Vec<u8> = row.get(2)?;
        let vector = from_blob(&blob);
        if index.matrix.is_empty() && index.matrix.dims() == 0 {
            index.matrix = VectorMatrix::new(vector.len());
        }
        if vector.len() != index.matrix.dims() || vector.is_empty() {
            return Err(StoreError::Corrupt(format!(
                "memory chunk {id}: a vector of {} floats among vectors of {}",
                vector.len(),
                index.matrix.dims()
            )));
        }
        index.push(id, &namespace, &vector);
        Ok(())
    })
}

impl Store {
    /// How this store's vector index has been loaded so far.
    pub fn vector_loads(&self) -> VectorLoads {
        self.lock().vector_loads
    }

    /// Up to `limit` chunks of `namespaces` that have no vector from `embedder` yet, oldest
    /// first, as (chunk id, text).
    pub async fn chunks_to_embed(
        &self,
        embedder: &str,
        namespaces: Vec<String>,
        limit: usize,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        check_search_namespaces(&namespaces)?;
        let namespaces = json_list(&namespaces)?;
        let embedder = embedder.to_owned();
        let limit = limit.clamp(1, 100_000) as i64;
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(concat!(
                pending_chunks!(),
                "SELECT c.id, c.text FROM pending
                 CROSS JOIN memory_chunks c ON c.id = pending.id
                 CROSS JOIN memory_items i ON i.id = c.item_id
                 WHERE i.namespace IN (SELECT value FROM json_each(?2))
                 ORDER BY c.id LIMIT ?3"
            ))?;
            let rows = stmt
                .query_map(params![embedder, namespaces, limit], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// The namespaces that have chunks without a vector from `embedder`.
    pub async fn namespaces_to_embed(&self, embedder: &str) -> Result<Vec<String>, StoreError> {
        let embedder = embedder.to_owned();
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(concat!(
                pending_chunks!(),
                "SELECT DISTINCT i.namespace FROM pending
                 CROSS JOIN memory_chunks c ON c.id = pending.id
                 CROSS JOIN memory_items i ON i.id = c.item_id
                 ORDER BY i.namespace"
            ))?;
            let rows = stmt
                .query_map(params![embedder], |r| r.get(0))?
                .collect::<Result<Vec<String>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// Stores the vectors `embedder` made for chunks (by chunk id), in one transaction.
    /// Vectors must all have the same, non-zero length.
    pub async fn store_vectors(
        &self,
        embedder: &str,
        vectors: Vec<(i64, Vec<f32>)>,
    ) -> Result<(), StoreError> {
        let dims = vectors.first().map_or(0, |(_, v)| v.len());
        if vectors.iter().any(|(_, v)| v.len() != dims || dims == 0) {
            return Err(StoreError::Invalid {
                field: "vectors",
                message: "vectors must all have the same, non-zero length".into(),
            });
        }
        if let Some((id, _)) = vectors
            .iter()
            .find(|(_, v)| v.iter().any(|x| !x.is_finite()))
        {
            return Err(StoreError::Invalid {
                field: "vectors",
                message: format!(
                    "the vector of chunk {id} holds a value that is not a finite number"
                ),
            });
        }
        let embedder = embedder.to_owned();
        self.run(move |db| {
            if db.pgvector {
                return crate::vectors_pgvector::store(db, &embedder, &vectors, dims);
            }
            let shared = Arc::clone(&db.vectors);
            if let Some(index) = read_index(&shared).as_ref()
                && index.embedder == embedder
                && index.matrix.dims() != 0
                && index.matrix.dims() != dims
            {
                return Err(StoreError::Invalid {
                    field: "vectors",
                    message: format!(
                        "{dims} dimensions, but `{embedder}` vectors stored earlier have {}",
                        index.matrix.dims()
                    ),
                });
            }
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let mut namespaces = Vec::with_capacity(vectors.len());
            {
                let mut update = tx.prepare_cached(
                    "UPDATE memory_chunks SET embedder = ?1, embedding = ?2 WHERE id = ?3
                     RETURNING (SELECT namespace FROM memory_items i WHERE i.id = item_id)",
                )?;
                for (id, vector) in &vectors {
                    let ns: Option<String> = update
                        .query_row(params![embedder, to_blob(vector), id], |r| r.get(0))
                        .ok();
                    namespaces.push(ns);
                }
            }
            tx.commit()?;
            let signature = signature(db, &embedder)?;
            if let Some(index) = write_index(&shared)
                .as_mut()
                .filter(|i| i.embedder == embedder)
            {
                if index.matrix.dims() == 0 {
                    index.matrix = VectorMatrix::new(dims);
                }
                // Rows are replaced, not duplicated, when a chunk is embedded again.
                let last = index.signature.1;
                let again: Vec<i64> = vectors
                    .iter()
                    .map(|(id, _)| *id)
                    .filter(|id| *id <= last)
                    .collect();
                index.remove(&again);
                for ((id, vector), ns) in vectors.iter().zip(namespaces) {
                    if let Some(ns) = ns {
                        index.push(*id, &ns, vector);
                    }
                }
                index.signature = signature;
            }
            Ok(())
        })
        .await
    }

    /// How many chunks of `namespaces` have a vector from `embedder`.
    pub async fn vector_coverage(
        &self,
        embedder: &str,
        namespaces: Vec<String>,
    ) -> Result<VectorCoverage, StoreError> {
        check_search_namespaces(&namespaces)?;
        let namespaces = json_list(&namespaces)?;
        let embedder = embedder.to_owned();
        self.run(move |db| {
            let (embedded, chunks): (i64, i64) = db
                .conn
                .prepare_cached(
                    "SELECT coalesce(sum(CASE WHEN c.embedder = ?1 THEN 1 ELSE 0 END), 0), count(*) FROM memory_chunks c
                     JOIN memory_items i ON i.id = c.item_id
                     WHERE i.namespace IN (SELECT value FROM json_each(?2))",
                )?
                .query_row(params![embedder, namespaces], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
            Ok(VectorCoverage {
                embedded: embedded as u64,
                chunks: chunks as u64,
            })
        })
        .await
    }

    /// The chunks of `namespaces` closest to `query.vector` (by cosine similarity, as the
    /// score), best first, with the tag and time filters applied.
    pub async fn vector_search(&self, query: VectorQuery) -> Result<Vec<MemoryHit>, StoreError> {
        check_search_namespaces(&query.namespaces)?;
        if query.vector.is_empty() {
            return Err(StoreError::Invalid {
                field: "vector",
                message: "is empty".into(),
            });
        }
        let limit = query.limit.clamp(1, 1000);
        let filtered = !query.tags.is_empty() || query.since.is_some();
        let embedder = query.embedder.clone();
        let shared = self
            .run(move |db| {
                if db.pgvector {
                    return Ok(None);
                }
                ensure_loaded(db, &embedder)?;
                Ok(Some(Arc::clone(&db.vectors)))
            })
            .await?;
        let Some(shared) = shared else {
            // pgvector: the database scans, with the filters in the same statement.
            let namespaces = json_list(&query.namespaces)?;
            let tags = json_list(&query.tags)?;
            return self
                .run(move |db| {
                    crate::vectors_pgvector::search(db, &query, &namespaces, &tags, limit)
                })
                .await;
        };
        // The scan holds the index, not the connection: keyword searches run beside it.
        let scan = tokio::task::spawn_blocking(move || {
            let guard = read_index(&shared);
            let Some(index) = guard.as_ref().filter(|i| !i.matrix.is_empty()) else {
                return Ok((query, Vec::new()));
            };
            if index.matrix.dims() != query.vector.len() {
                return Err(StoreError::Invalid {
                    field: "vector",
                    message: format!(
                        "{} dimensions, but the stored `{}` vectors have {}",
                        query.vector.len(),
                        query.embedder,
                        index.matrix.dims()
                    ),
                });
            }
            let allowed: Vec<bool> = index
                .namespaces
                .iter()
                .map(|n| query.namespaces.contains(n))
                .collect();
            // Filters are applied after the scan, so take more candidates when there are any.
            let k = if filtered { limit * 8 } else { limit };
            let best = index.matrix.top(&query.vector, &allowed, k, query.scan);
            Ok((query, best))
        });
        let (query, best) = scan.await??;
        if best.is_empty() {
            return Ok(Vec::new());
        }
        self.run(move |db| {
            let scores: HashMap<i64, f32> = best.iter().map(|&(s, id)| (id, s)).collect();
            let ids = json_list(&best.iter().map(|b| b.1).collect::<Vec<_>>())?;
            let tags = json_list(&query.tags)?;
            let mut stmt = db.conn.prepare_cached(
                "SELECT c.item_id, c.id, i.namespace, c.text, i.tags, i.source, i.created_at
                 FROM memory_chunks c JOIN memory_items i ON i.id = c.item_id
                 WHERE c.id IN (SELECT CAST(value AS BIGINT) FROM json_each(?1))
                   AND (CAST(?2 AS TEXT) IS NULL OR i.created_at >= ?2)
                   AND NOT EXISTS (SELECT 1 FROM json_each(?3) want
                                   WHERE want.value NOT IN (SELECT value FROM json_each(i.tags)))",
            )?;
            let mut hits = stmt
                .query_map(params![ids, query.since, tags], |r| {
                    let chunk_id: i64 = r.get(1)?;
                    hit_from_row(r, f64::from(scores.get(&chunk_id).copied().unwrap_or(0.0)))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            hits.sort_by(|a, b| {
                b.score
                    .total_cmp(&a.score)
                    .then(a.chunk_id.cmp(&b.chunk_id))
            });
            hits.truncate(limit);
            Ok(hits)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::dot;

    #[test]
    fn dot_matches_the_plain_sum_for_any_length() {
        for len in [1, 15, 16, 17, 384, 1000] {
            let a: Vec<f32> = (0..len).map(|i| (i % 7) as f32 * 0.5).collect();
            let b: Vec<f32> = (0..len).map(|i| (i % 5) as f32 - 2.0).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - plain).abs() < 1e-3, "{len}");
        }
    }
}
