//! Secret fingerprints per agent: what a later session needs to redact a value it never read.

use crate::error::StoreError;
use crate::sql::params;
use crate::store::{Store, from_sql_int, to_sql_int};
use reef_core::SecretFingerprint;

/// When a secret was last given to a call, to whom and by which tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastSecretUse {
    pub at: String,
    pub agent: Option<String>,
    pub tool: String,
}

impl Store {
    /// Records that `used.tool` is about to use secrets: new fingerprints, and a `secret.used`
    /// audit record with the names (never a value), in one transaction.
    pub async fn record_secret_use(
        &self,
        used: SecretUse<'_>,
        fingerprints: &[SecretFingerprint],
    ) -> Result<(), StoreError> {
        let agent = used.agent.to_owned();
        let data = serde_json::json!({"names": used.names, "tool": used.tool, "to": used.to});
        let fingerprints = fingerprints.to_vec();
        let audit = !used.names.is_empty();
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(crate::sql::TransactionBehavior::Immediate)?;
            insert_fingerprints(&tx, &now, &agent, &fingerprints)?;
            if audit {
                crate::audit::insert_audit(&tx, &now, "secret.used", Some(&agent), &data)?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Each secret's last use (from the audit log's `secret.used` records): by name.
    pub async fn last_secret_uses(
        &self,
    ) -> Result<std::collections::BTreeMap<String, LastSecretUse>, StoreError> {
        self.run(|db| {
            // SQLite takes the bare columns from the row that has max(seq).
            let mut stmt = db.conn.prepare(
                "SELECT j.value, max(a.seq), a.at, a.agent, json_extract(a.data, '$.tool') \
                 FROM audit a, json_each(a.data, '$.names') j \
                 WHERE a.kind = 'secret.used' GROUP BY j.value",
            )?;
            let rows = stmt.query_map(params![], |r| {
                Ok((
                    r.get::<String>(0)?,
                    LastSecretUse {
                        at: r.get(2)?,
                        agent: r.get(3)?,
                        tool: r.get::<Option<String>>(4)?.unwrap_or_default(),
                    },
                ))
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
    }

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
            insert_fingerprints(&tx, &now, &agent, &fingerprints)?;
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
                 WHERE agent = ?1 ORDER BY created_at, name, hash",
            )?;
            let rows = stmt.query_map(params![agent], |r| {
                Ok((
                    r.get::<String>(0)?,
                    r.get::<i64>(1)?,
                    r.get::<i64>(2)?,
                    r.get::<Vec<u8>>(3)?,
                    r.get::<Vec<u8>>(4)?,
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

/// A tool about to use secrets, for the audit log.
#[derive(Clone, Copy, Debug)]
pub struct SecretUse<'a> {
    /// The agent's name.
    pub agent: &'a str,
    pub tool: &'a str,
    pub names: &'a [String],
    /// Where a request sends them (a host), when it is one.
    pub to: Option<&'a str>,
}

fn insert_fingerprints(
    tx: &crate::sql::Conn,
    now: &str,
    agent: &str,
    fingerprints: &[SecretFingerprint],
) -> Result<(), StoreError> {
    for f in fingerprints {
        tx.prepare_cached(
            "INSERT INTO secret_fingerprints (agent, name, len, probe, salt, hash, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING",
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
    Ok(())
}
