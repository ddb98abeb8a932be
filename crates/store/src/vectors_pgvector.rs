//! Vectors with pgvector (PostgreSQL that has the extension): each chunk's vector written
//! to `embedding_vec` beside the portable `bytea`, and a search one exact scan in the database
//! (pgvector's inner product, which is the cosine of reef's unit vectors) with the namespace,
//! tag and time filters in the same statement. Nothing is held in RAM.

use crate::error::StoreError;
use crate::memory::{MemoryHit, hit_from_row};
use crate::pg::vector_literal;
use crate::sql::{Conn, OptionalExtension, TransactionBehavior, params};
use crate::store::Db;
use crate::vectors::{VectorQuery, from_blob, to_blob};

/// Rows read per statement when filling `embedding_vec`.
const FILL_BATCH: i64 = 500;

/// The dimensions of `embedder`'s vectors in the database, if it has any.
fn stored_dims(conn: &Conn, embedder: &str) -> Result<Option<usize>, StoreError> {
    let dims: Option<i64> = conn
        .prepare_cached(
            "SELECT CAST(vector_dims(embedding_vec) AS BIGINT) FROM memory_chunks
             WHERE embedder = ?1 AND embedding_vec IS NOT NULL LIMIT 1",
        )?
        .query_row(params![embedder], |r| r.get(0))
        .optional()?;
    Ok(dims.map(|d| usize::try_from(d).unwrap_or(0)))
}

/// Sets `embedding_vec` from `embedding` wherever only the latter is there (vectors stored by
/// a node that ran before the extension was installed, or copied by `reef migrate`), and
/// returns how many it set. A stored vector that pgvector cannot hold (a value that is not a
/// finite number) is left out of the search, with a warning.
pub(crate) fn fill(conn: &Conn) -> Result<u64, StoreError> {
    let mut filled = 0;
    let mut after = 0_i64;
    loop {
        let rows: Vec<(i64, Vec<u8>)> = conn
            .prepare_cached(
                "SELECT id, embedding FROM memory_chunks
                 WHERE embedding IS NOT NULL AND embedding_vec IS NULL AND id > ?1
                 ORDER BY id LIMIT ?2",
            )?
            .query_map(params![after, FILL_BATCH], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let Some(&(last, _)) = rows.last() else {
            return Ok(filled);
        };
        after = last;
        let mut update = conn.prepare_cached(
            "UPDATE memory_chunks SET embedding_vec = CAST(CAST(?1 AS TEXT) AS vector)
             WHERE id = ?2",
        )?;
        for (id, blob) in rows {
            let vector = from_blob(&blob);
            if vector.iter().any(|x| !x.is_finite()) {
                tracing::warn!(
                    chunk = id,
                    "a stored vector holds a value that is not a finite number; it is not searched"
                );
                continue;
            }
            update.execute(params![vector_literal(&vector), id])?;
            filled += 1;
        }
    }
}

/// Stores `vectors` (all of `dims` dimensions, checked by the caller) in one transaction,
/// refusing dimensions other than those `embedder`'s vectors already have.
pub(crate) fn store(
    db: &Db,
    embedder: &str,
    vectors: &[(i64, Vec<f32>)],
    dims: usize,
) -> Result<(), StoreError> {
    let tx = db
        .conn
        .transaction_with_behavior(TransactionBehavior::Immediate)?;
    if let Some(stored) = stored_dims(&tx, embedder)?
        && stored != dims
    {
        return Err(StoreError::Invalid {
            field: "vectors",
            message: format!(
                "{dims} dimensions, but `{embedder}` vectors stored earlier have {stored}"
            ),
        });
    }
    {
        let mut update = tx.prepare_cached(
            "UPDATE memory_chunks SET embedder = ?1, embedding = ?2,
                 embedding_vec = CAST(CAST(?3 AS TEXT) AS vector)
             WHERE id = ?4",
        )?;
        for (id, vector) in vectors {
            update.execute(params![
                embedder,
                to_blob(vector),
                vector_literal(vector),
                id
            ])?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// The `limit` chunks closest to `query.vector` that pass its filters, best first.
/// `namespaces` and `tags` are JSON lists.
pub(crate) fn search(
    db: &Db,
    query: &VectorQuery,
    namespaces: &str,
    tags: &str,
    limit: usize,
) -> Result<Vec<MemoryHit>, StoreError> {
    if let Some(stored) = stored_dims(&db.conn, &query.embedder)?
        && stored != query.vector.len()
    {
        return Err(StoreError::Invalid {
            field: "vector",
            message: format!(
                "{} dimensions, but the stored `{}` vectors have {stored}",
                query.vector.len(),
                query.embedder,
            ),
        });
    }
    let mut stmt = db.conn.prepare_cached(
        "SELECT c.item_id, c.id, i.namespace, c.text, i.tags, i.source, i.created_at,
                -(c.embedding_vec <#> CAST(CAST(?1 AS TEXT) AS vector))
         FROM memory_chunks c JOIN memory_items i ON i.id = c.item_id
         WHERE c.embedder = ?2 AND c.embedding_vec IS NOT NULL
           AND i.namespace IN (SELECT value FROM json_each(?3))
           AND (CAST(?4 AS TEXT) IS NULL OR i.created_at >= ?4)
           AND NOT EXISTS (SELECT 1 FROM json_each(?5) want
                           WHERE want.value NOT IN (SELECT value FROM json_each(i.tags)))
         ORDER BY c.embedding_vec <#> CAST(CAST(?1 AS TEXT) AS vector), c.id
         LIMIT ?6",
    )?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let hits = stmt
        .query_map(
            params![
                vector_literal(&query.vector),
                query.embedder,
                namespaces,
                query.since,
                tags,
                limit
            ],
            |r| hit_from_row(r, r.get(7)?),
        )?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(hits)
}
