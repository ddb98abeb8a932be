//! Secret fingerprints per agent: what a later session needs to redact a value it never read.

use crate::error::StoreError;
use crate::store::{Store, from_sql_int, to_sql_int};
use reef_core::SecretFingerprint;
use rusqlite::params;

impl Store {
    /// Remembers `fingerprints` for `agent` (one already known, by its salted hash, is kept).
    pub async fn add_secret_fingerprints(
        &self,
        agent: &str,
        fingerprints: &[SecretFingerprint],
    ) -> Result<(), StoreError> {
        let agent = agent.to_owned();
        let fingerprints = fingerprints.to_vec();
        self.run(move |db| {
            let tx = db.conn.transaction()?;
            let now = db.clock.now();
            for f in &fingerprints {
                tx.prepare_cached(
                    "INSERT OR IGNORE INTO secret_fingerprints
                       (agent, name, len, probe, salt, hash, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?
                .execute(params![
                    agent,
                    f.name,
                    to_sql_int(f.len as u64),
                    i64::from(f.probe),
                    f.salt,
                    f.hash,
                    now,
                ])?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Every fingerprint remembered for `agent`, oldest first.
    pub async fn secret_fingerprints(
        &self,
        agent: &str,
    ) -> Result<Vec<SecretFingerprint>, StoreError> {
        let agent = agent.to_owned();
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(
                "SELECT name, len, probe, salt, hash FROM secret_fingerprints
                 WHERE agent = ?1 ORDER BY created_at, rowid",
            )?;
            let rows = stmt.query_map(params![agent], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, Vec<u8>>(3)?,
                    r.get::<_, Vec<u8>>(4)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (name, len, probe, salt, hash) = row?;
                out.push(SecretFingerprint {
                    name,
                    len: usize::try_from(from_sql_int(len, "a fingerprint's length")?)
                        .unwrap_or(usize::MAX),
                    probe: u32::try_from(probe).map_err(|_| {
                        StoreError::Corrupt(format!("a fingerprint's probe is {probe}"))
                    })?,
                    salt,
                    hash,
                });
            }
            Ok(out)
        })
        .await
    }
}
