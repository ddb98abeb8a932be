//! pgvector, when the server has it: detected at connect, the extension created if it can be,
//! and each chunk's vector kept a second time as a `vector` column (`embedding_vec`) beside
//! the portable `bytea`, so a vector search is one exact scan in the database and no node
//! holds the vectors in RAM. Without it, vectors are searched in RAM as on SQLite.

use tokio_postgres::Transaction;

/// Makes pgvector usable by this database if the server has it, inside the migration
/// transaction (so nodes starting together do this once): creates the extension when it is
/// available but not created (a user without the right to do so gets the RAM path, logged)
/// and adds `memory_chunks.embedding_vec` (which `vectors_pgvector::fill` then fills for
/// vectors stored without it). Returns pgvector's version, or `None` when it is not there.
pub(super) async fn enable(tx: &Transaction<'_>) -> Result<Option<String>, tokio_postgres::Error> {
    let version = match installed(tx).await? {
        Some(version) => version,
        None => {
            let available = tx
                .query_opt(
                    "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'",
                    &[],
                )
                .await?
                .is_some();
            if !available {
                return Ok(None);
            }
            tx.batch_execute("SAVEPOINT reef_pgvector").await?;
            if let Err(err) = tx
                .batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
                .await
            {
                tracing::warn!(
                    error = %err,
                    "pgvector is installed on the server but this user cannot create the \
                     extension (CREATE EXTENSION vector, as a superuser, enables it); vectors \
                     are searched in RAM"
                );
                tx.batch_execute("ROLLBACK TO SAVEPOINT reef_pgvector")
                    .await?;
                return Ok(None);
            }
            tx.batch_execute("RELEASE SAVEPOINT reef_pgvector").await?;
            match installed(tx).await? {
                Some(version) => version,
                None => return Ok(None),
            }
        }
    };
    tx.batch_execute("ALTER TABLE memory_chunks ADD COLUMN IF NOT EXISTS embedding_vec vector")
        .await?;
    Ok(Some(version))
}

/// The version of the `vector` extension created in this database.
async fn installed(tx: &Transaction<'_>) -> Result<Option<String>, tokio_postgres::Error> {
    Ok(tx
        .query_opt(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
            &[],
        )
        .await?
        .map(|row| row.get(0)))
}

/// A vector as pgvector's text form, `[x,y,...]`, each float written so it reads back the
/// same.
pub(crate) fn literal(vector: &[f32]) -> String {
    let mut out = String::with_capacity(vector.len() * 12 + 2);
    out.push('[');
    for (i, x) in vector.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&x.to_string());
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::literal;

    #[test]
    fn a_literal_reads_back_as_the_same_floats() {
        let v = [0.1f32, -3.5e-8, 1.0, f32::MIN_POSITIVE, 123_456.79];
        let text = literal(&v);
        assert!(text.starts_with('[') && text.ends_with(']'), "{text}");
        let back: Vec<f32> = text[1..text.len() - 1]
            .split(',')
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(back, v);
    }
}
