//! Vector search over memory chunks: each chunk's unit vector is stored next to it (with the id
//! of the embedder that made it) and, for searching, held in RAM as one contiguous matrix that
//! is scanned exactly — a dot product per chunk, keeping the best k. The matrix is loaded on
//! the first search, kept in step with this process's writes, and reloaded when another process
//! changed the vectors.

use crate::error::StoreError;
use crate::memory::{MemoryHit, check_search_namespaces, json_list, parse_tags};
use crate::store::{Db, Store};
use rusqlite::{TransactionBehavior, params};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

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
}

/// How many chunks have a vector from an embedder, of how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct VectorCoverage {
    pub embedded: u64,
    pub chunks: u64,
}

/// The in-RAM matrix of one embedder's vectors.
pub(crate) struct VectorIndex {
    embedder: String,
    dims: usize,
    chunk_ids: Vec<i64>,
    namespace_of: Vec<u32>,
    namespaces: Vec<String>,
    data: Vec<f32>,
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
        self.chunk_ids.push(chunk_id);
        self.namespace_of.push(ns);
        self.data.extend_from_slice(vector);
    }

    /// Drops the rows of `chunk_ids` (order of the rest is kept).
    pub(crate) fn remove(&mut self, chunk_ids: &[i64]) {
        if chunk_ids.is_empty() {
            return;
        }
        let mut keep = 0;
        for row in 0..self.chunk_ids.len() {
            if chunk_ids.contains(&self.chunk_ids[row]) {
                continue;
            }
            if keep != row {
                self.chunk_ids[keep] = self.chunk_ids[row];
                self.namespace_of[keep] = self.namespace_of[row];
                self.data
                    .copy_within(row * self.dims..(row + 1) * self.dims, keep * self.dims);
            }
            keep += 1;
        }
        self.chunk_ids.truncate(keep);
        self.namespace_of.truncate(keep);
        self.data.truncate(keep * self.dims);
    }

    /// The best `k` rows in `allowed` namespaces by dot product with `query`, best first.
    fn top(&self, query: &[f32], allowed: &[bool], k: usize) -> Vec<(f32, i64)> {
        let mut heap = BinaryHeap::with_capacity(k + 1);
        for (row, vector) in self.data.chunks_exact(self.dims).enumerate() {
            if !allowed[self.namespace_of[row] as usize] {
                continue;
            }
            let score = dot(query, vector);
            if heap.len() < k {
                heap.push(MinScore(score, row));
            } else if heap.peek().is_some_and(|m| score > m.0) {
                heap.pop();
                heap.push(MinScore(score, row));
            }
        }
        let mut best: Vec<(f32, i64)> = heap
            .into_iter()
            .map(|MinScore(s, row)| (s, self.chunk_ids[row]))
            .collect();
        best.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        best
    }
}

/// A heap entry ordered so the worst score is on top.
struct MinScore(f32, usize);

impl PartialEq for MinScore {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for MinScore {}
impl PartialOrd for MinScore {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for MinScore {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then(self.1.cmp(&other.1))
    }
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

fn to_blob(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_blob(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn signature(db: &Db, embedder: &str) -> rusqlite::Result<(i64, i64, i64)> {
    db.conn
        .prepare_cached(
            "SELECT count(*), coalesce(max(id), 0), coalesce(sum(id), 0)
             FROM memory_chunks WHERE embedder = ?1",
        )?
        .query_row(params![embedder], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
}

fn data_version(db: &Db) -> rusqlite::Result<i64> {
    db.conn.query_row("PRAGMA data_version", [], |r| r.get(0))
}

/// Makes `db.vectors` hold `embedder`'s vectors, loading them if it holds another embedder's,
/// nothing, or a copy another process has changed since.
fn ensure_loaded(db: &mut Db, embedder: &str) -> Result<(), StoreError> {
    let version = data_version(db)?;
    if let Some(index) = &db.vectors
        && index.embedder == embedder
    {
        if index.data_version == version {
            return Ok(());
        }
        let now = signature(db, embedder)?;
        if let Some(index) = db.vectors.as_mut() {
            index.data_version = version;
            if index.signature == now {
                return Ok(());
            }
        }
    }
    let mut index = VectorIndex {
        embedder: embedder.to_owned(),
        dims: 0,
        chunk_ids: Vec::new(),
        namespace_of: Vec::new(),
        namespaces: Vec::new(),
        data: Vec::new(),
        data_version: version,
        signature: signature(db, embedder)?,
    };
    let mut stmt = db.conn.prepare_cached(
        "SELECT c.id, i.namespace, c.embedding FROM memory_chunks c
         JOIN memory_items i ON i.id = c.item_id
         WHERE c.embedder = ?1 AND c.embedding IS NOT NULL
         ORDER BY c.id",
    )?;
    let mut rows = stmt.query(params![embedder])?;
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let namespace: String = row.get(1)?;
        let blob: Vec<u8> = row.get(2)?;
        let vector = from_blob(&blob);
        if index.dims == 0 {
            index.dims = vector.len();
        }
        if vector.len() != index.dims || vector.is_empty() {
            return Err(StoreError::Corrupt(format!(
                "memory chunk {id}: a vector of {} floats among vectors of {}",
                vector.len(),
                index.dims
            )));
        }
        index.push(id, &namespace, &vector);
    }
    drop(rows);
    drop(stmt);
    db.vectors = Some(index);
    Ok(())
}

impl Store {
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
            // Three index ranges on `embedder` (NULL, below, above), materialised first and
            // driving the joins (CROSS JOIN fixes the order): a store whose chunks are all
            // embedded answers from the index without reading a row.
            let mut stmt = db.conn.prepare_cached(
                "WITH pending AS MATERIALIZED (
                     SELECT id FROM memory_chunks WHERE embedder IS NULL
                     UNION ALL SELECT id FROM memory_chunks WHERE embedder < ?1
                     UNION ALL SELECT id FROM memory_chunks WHERE embedder > ?1)
                 SELECT c.id, c.text FROM pending
                 CROSS JOIN memory_chunks c ON c.id = pending.id
                 CROSS JOIN memory_items i ON i.id = c.item_id
                 WHERE i.namespace IN (SELECT value FROM json_each(?2))
                 ORDER BY c.id LIMIT ?3",
            )?;
            let rows = stmt
                .query_map(params![embedder, namespaces, limit], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
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
        let embedder = embedder.to_owned();
        self.run(move |db| {
            if let Some(index) = &db.vectors
                && index.embedder == embedder
                && index.dims != 0
                && index.dims != dims
            {
                return Err(StoreError::Invalid {
                    field: "vectors",
                    message: format!(
                        "{dims} dimensions, but `{embedder}` vectors stored earlier have {}",
                        index.dims
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
            if let Some(index) = db.vectors.as_mut().filter(|i| i.embedder == embedder) {
                index.dims = dims;
                let ids: Vec<i64> = vectors.iter().map(|(id, _)| *id).collect();
                index.remove(&ids);
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
                    "SELECT coalesce(sum(c.embedder = ?1), 0), count(*) FROM memory_chunks c
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
        self.run(move |db| {
            ensure_loaded(db, &query.embedder)?;
            let Some(index) = db.vectors.as_ref() else {
                return Ok(Vec::new());
            };
            if index.chunk_ids.is_empty() {
                return Ok(Vec::new());
            }
            if index.dims != query.vector.len() {
                return Err(StoreError::Invalid {
                    field: "vector",
                    message: format!(
                        "{} dimensions, but the stored `{}` vectors have {}",
                        query.vector.len(),
                        query.embedder,
                        index.dims
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
            let best = index.top(&query.vector, &allowed, k);
            let scores: HashMap<i64, f32> = best.iter().map(|&(s, id)| (id, s)).collect();
            let ids = json_list(&best.iter().map(|b| b.1).collect::<Vec<_>>())?;
            let tags = json_list(&query.tags)?;
            let mut stmt = db.conn.prepare_cached(
                "SELECT c.item_id, c.id, i.namespace, c.text, i.tags, i.source, i.created_at
                 FROM memory_chunks c JOIN memory_items i ON i.id = c.item_id
                 WHERE c.id IN (SELECT value FROM json_each(?1))
                   AND (?2 IS NULL OR i.created_at >= ?2)
                   AND NOT EXISTS (SELECT 1 FROM json_each(?3) want
                                   WHERE want.value NOT IN (SELECT value FROM json_each(i.tags)))",
            )?;
            let mut hits = stmt
                .query_map(params![ids, query.since, tags], |r| {
                    let chunk_id: i64 = r.get(1)?;
                    Ok(MemoryHit {
                        item_id: r.get(0)?,
                        chunk_id,
                        namespace: r.get(2)?,
                        text: r.get(3)?,
                        tags: parse_tags(&r.get::<_, String>(4)?),
                        source: r.get(5)?,
                        created_at: r.get(6)?,
                        score: f64::from(scores.get(&chunk_id).copied().unwrap_or(0.0)),
                    })
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
