//! The audit log: append-only records, each chained to the one before by a keyed hash
//! (reef-security's `audit`), written in the same transaction as what they record. Events the
//! operator must be able to account for (approvals and answers, operator commands, agents
//! spawned and destroyed, routines changed, terminal sessions) are mirrored here as they are
//! appended to the event history, which is pruned; records that are not events (tool calls,
//! written by the turn engine before a call runs; secret uses; API requests; the
//! configuration loaded; denials) are appended directly.

use crate::error::StoreError;
use crate::sql::{Conn, OptionalExtension, TransactionBehavior, params};
use crate::store::{Store, from_sql_int, to_sql_int};
use reef_security::audit::{
    AuditFields, AuditKey, ChainBreak, ChainCheck, ChainStart, GENESIS, decode_hex, hex, link,
    seal, sha256_hex,
};
use serde::Serialize;
use serde_json::{Value, json};

/// One record as stored.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditRecord {
    pub seq: u64,
    pub at: String,
    pub kind: String,
    /// The agent's name when the record was written.
    pub agent: Option<String>,
    pub data: Value,
    pub prev: String,
    pub hash: String,
}

/// Which records a query returns; every field given narrows it.
#[derive(Clone, Debug)]
pub struct AuditFilter {
    /// An agent's name.
    pub agent: Option<String>,
    /// A kind (`tool.call`), or a prefix ending in `.` (`approval.`).
    pub kind: Option<String>,
    /// RFC3339 bounds: at or after `since`, before `until`.
    pub since: Option<String>,
    pub until: Option<String>,
    /// At most this many, the newest.
    pub limit: usize,
}

impl Default for AuditFilter {
    /// Every record, the newest 100.
    fn default() -> Self {
        Self {
            agent: None,
            kind: None,
            since: None,
            until: None,
            limit: 100,
        }
    }
}

/// What verification found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditVerdict {
    /// Records checked before the end or the break.
    pub checked: u64,
    /// The checkpoint pruning left, where the check started (`None`: from the first record).
    pub checkpoint: Option<u64>,
    /// The last record that chains.
    pub head: u64,
    /// Where the chain breaks, if it does.
    pub broken: Option<ChainBreak>,
}

/// The event kinds that are also audit records, with what of their data is kept.
pub(crate) fn audit_view(kind: &str, data: &Value) -> Option<Value> {
    match kind {
        // What was typed and shown stays in the event history; the log keeps its hash.
        "terminal.closed" => {
            let mut kept = data.clone();
            if let Some(map) = kept.as_object_mut() {
                for field in ["typed", "shown_tail"] {
                    if let Some(text) = map.remove(field) {
                        let text = text.as_str().unwrap_or("").to_owned();
                        map.insert(
                            format!("{field}_sha256"),
                            Value::String(sha256_hex(text.as_bytes())),
                        );
                    }
                }
            }
            Some(kept)
        }
        "operator.command"
        | "operator.refused"
        | "agent.spawned"
        | "agent.sandbox"
        | "agent.destroyed"
        | "agent.updated"
        | "agent.model_changed"
        | "session.reset"
        | "terminal.opened"
        | "debug.edited"
        | "debug.breakpoints"
        | "daemon.recovered"
        | "daemon.stopped" => Some(data.clone()),
        _ if kind.starts_with("approval.")
            || kind.starts_with("question.")
            || (kind.starts_with("routine.")
                && !matches!(kind, "routine.fired" | "routine.report")) =>
        {
            Some(data.clone())
        }
        _ => None,
    }
}

/// Appends a record inside the caller's transaction, chained to the newest one; returns its
/// seq. `agent` is the agent's name as it will be kept (see [`agent_name`]).
pub(crate) fn insert_audit(
    conn: &Conn,
    now: &str,
    kind: &str,
    agent: Option<&str>,
    data: &Value,
) -> Result<u64, StoreError> {
    let head = head(conn)?;
    let seq = head.seq.saturating_add(1);
    let data = data.to_string();
    let fields = AuditFields {
        seq,
        at: now,
        kind,
        agent,
        data: &data,
    };
    let hash = hex(&link(&conn.audit_key, &head.hash, &fields));
    conn.prepare_cached(
        "INSERT INTO audit (seq, at, kind, agent, data, prev, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        to_sql_int(seq),
        now,
        kind,
        agent,
        data,
        hex(&head.hash),
        hash
    ])?;
    Ok(seq)
}

/// The name of the agent with id `id`, if it exists: records keep names, which stay readable
/// after the agent is destroyed.
pub(crate) fn agent_name(conn: &Conn, id: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT name FROM agents WHERE id = ?1")?
        .query_row(params![id], |r| r.get::<String>(0))
        .optional()?)
}

/// The newest record, or the checkpoint when pruning removed every record, or the start.
fn head(conn: &Conn) -> Result<ChainStart, StoreError> {
    let newest: Option<(i64, String)> = conn
        .prepare_cached("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")?
        .query_row(params![], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let newest = match newest {
        Some(row) => Some(row),
        None => conn
            .prepare_cached("SELECT seq, hash FROM audit_checkpoint WHERE id = 1")?
            .query_row(params![], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?,
    };
    match newest {
        None => Ok(ChainStart::GENESIS),
        Some((seq, hash)) => Ok(ChainStart {
            seq: from_sql_int(seq, "audit seq")?,
            // A damaged hash still gets a successor; verification names the damaged record.
            hash: decode_hex(&hash).unwrap_or(GENESIS),
        }),
    }
}

type Row = (i64, String, String, Option<String>, String, String, String);

fn row(r: &crate::sql::Row<'_>) -> crate::sql::Result<Row> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

impl Store {
    /// Appends a record that is not an event (a tool call, an API request, the configuration
    /// loaded, …); `agent` is an id or a name.
    pub async fn append_audit(
        &self,
        kind: &str,
        agent: Option<&str>,
        data: Value,
    ) -> Result<u64, StoreError> {
        let kind = kind.to_owned();
        let agent = agent.map(str::to_owned);
        self.run(move |db| {
            let now = db.clock.now();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let name = match agent {
                Some(agent) => Some(agent_name(&tx, &agent)?.unwrap_or(agent)),
                None => None,
            };
            let seq = insert_audit(&tx, &now, &kind, name.as_deref(), &data)?;
            tx.commit()?;
            Ok(seq)
        })
        .await
    }

    /// Appends `tool.call`: who called which tool in which session, the SHA-256 and length
    /// of the arguments (which may hold anything the model wrote; they stay in the
    /// transcript), and why the engine does not run it when it does not (`skipped`: the
    /// operator's debugger skipped it, or a blind write was refused under the small profile;
    /// a call waiting for approval is recorded by its `approval.created`).
    pub async fn audit_tool_call(
        &self,
        agent: &str,
        session: &str,
        call: (&str, &str, &str),
        skipped: Option<&str>,
    ) -> Result<u64, StoreError> {
        let (call_id, tool, arguments) = call;
        let data = json!({
            "call_id": call_id,
            "name": tool,
            "session": session,
            "arguments_sha256": sha256_hex(arguments.as_bytes()),
            "arguments_bytes": arguments.len(),
            "skipped": skipped,
        });
        self.append_audit("tool.call", Some(agent), data).await
    }

    /// Records matching `filter`, newest first.
    pub async fn audit_records(&self, filter: AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
        let (kind_exact, kind_prefix) = match filter.kind {
            Some(kind) if kind.ends_with('.') => (None, Some(kind)),
            Some(kind) => (Some(kind), None),
            None => (None, None),
        };
        let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
        self.run(move |db| {
            let mut stmt = db.conn.prepare_cached(
                "SELECT seq, at, kind, agent, data, prev, hash FROM audit
                 WHERE (CAST(?1 AS TEXT) IS NULL OR agent = ?1)
                   AND (CAST(?2 AS TEXT) IS NULL OR kind = ?2)
                   AND (CAST(?3 AS TEXT) IS NULL OR substr(kind, 1, length(CAST(?3 AS TEXT))) = ?3)
                   AND (CAST(?4 AS TEXT) IS NULL OR at >= ?4)
                   AND (CAST(?5 AS TEXT) IS NULL OR at < ?5)
                 ORDER BY seq DESC LIMIT ?6",
            )?;
            let rows = stmt.query_map(
                params![
                    filter.agent,
                    kind_exact,
                    kind_prefix,
                    filter.since,
                    filter.until,
                    limit
                ],
                row,
            )?;
            let mut out = Vec::new();
            for r in rows {
                let (seq, at, kind, agent, data, prev, hash) = r?;
                let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                out.push(AuditRecord {
                    seq: from_sql_int(seq, "audit seq")?,
                    at,
                    kind,
                    agent,
                    data,
                    prev,
                    hash,
                });
            }
            Ok(out)
        })
        .await
    }

    /// Walks the whole log from its start (or pruning's checkpoint), oldest first, and says
    /// where the chain breaks, if it does.
    pub async fn verify_audit(&self) -> Result<AuditVerdict, StoreError> {
        self.run(move |db| {
            let key = db.conn.audit_key.clone();
            let tx = db.conn.transaction()?;
            let verdict = verify(&tx, key)?;
            tx.commit()?;
            Ok(verdict)
        })
        .await
    }

    /// Removes the records written before `before` (RFC3339) and leaves a sealed checkpoint
    /// in their place; refuses when those records do not verify (pruning would hide it).
    /// Returns how many were removed.
    pub async fn prune_audit(&self, before: &str) -> Result<u64, StoreError> {
        let before = before.to_owned();
        // The walk runs on a read snapshot first, so the daemon's writes do not wait for it.
        let verdict = self.verify_audit().await?;
        self.run(move |db| {
            let now = db.clock.now();
            let key = db.conn.audit_key.clone();
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let last: Option<(i64, String)> = tx
                .prepare_cached(
                    "SELECT seq, hash FROM audit WHERE at < ?1 ORDER BY seq DESC LIMIT 1",
                )?
                .query_row(params![before], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((last, last_hash)) = last else {
                return Ok(0);
            };
            let through = from_sql_int(last, "audit seq")?;
            if verdict.broken.is_none() && verdict.head < through {
                return Err(StoreError::Conflict(
                    "the audit log grew while it was being verified; prune again".into(),
                ));
            }
            if let Some(broken) = verdict
                .broken
                .filter(|b| b.seq() <= through.saturating_add(1))
            {
                return Err(StoreError::Conflict(format!(
                    "the audit log does not verify ({broken}); it is left as it is so the \
                     damage stays visible"
                )));
            }
            let hash = decode_hex(&last_hash)
                .ok_or_else(|| StoreError::Corrupt(format!("audit record {through} hash")))?;
            let removed = tx
                .prepare_cached("DELETE FROM audit WHERE seq <= ?1")?
                .execute(params![last])?;
            tx.prepare_cached(
                "INSERT INTO audit_checkpoint (id, seq, hash, seal, pruned_at)
                 VALUES (1, ?1, ?2, ?3, ?4)
                 ON CONFLICT (id) DO UPDATE SET seq = ?1, hash = ?2, seal = ?3, pruned_at = ?4",
            )?
            .execute(params![
                last,
                last_hash,
                hex(&seal(&key, through, &hash)),
                now
            ])?;
            let removed = u64::try_from(removed).unwrap_or(u64::MAX);
            insert_audit(
                &tx,
                &now,
                "audit.pruned",
                None,
                &json!({"through": through, "removed": removed, "before": before}),
            )?;
            tx.commit()?;
            Ok(removed)
        })
        .await
    }
}

fn verify(conn: &Conn, key: AuditKey) -> Result<AuditVerdict, StoreError> {
    let checkpoint: Option<(i64, String, String)> = conn
        .prepare_cached("SELECT seq, hash, seal FROM audit_checkpoint WHERE id = 1")?
        .query_row(params![], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let (mut check, checkpoint) = match checkpoint {
        None => (ChainCheck::new(key), None),
        Some((seq, hash, sealed)) => {
            let seq = from_sql_int(seq, "audit checkpoint seq")?;
            let start = ChainStart {
                seq,
                hash: decode_hex(&hash).unwrap_or(GENESIS),
            };
            let sealed = decode_hex(&sealed).unwrap_or(GENESIS);
            match ChainCheck::from_checkpoint(key, &start, &sealed) {
                Ok(check) => (check, Some(seq)),
                Err(broken) => {
                    return Ok(AuditVerdict {
                        checked: 0,
                        checkpoint: Some(seq),
                        head: seq,
                        broken: Some(broken),
                    });
                }
            }
        }
    };
    let mut stmt = conn
        .prepare_cached("SELECT seq, at, kind, agent, data, prev, hash FROM audit ORDER BY seq")?;
    for r in stmt.query_map(params![], row)? {
        let (seq, at, kind, agent, data, prev, hash) = r?;
        let seq = from_sql_int(seq, "audit seq")?;
        let fields = AuditFields {
            seq,
            at: &at,
            kind: &kind,
            agent: agent.as_deref(),
            data: &data,
        };
        // A hash that is not hex was edited: it cannot match.
        let prev = decode_hex(&prev);
        let hash = decode_hex(&hash);
        let result = match (prev, hash) {
            (Some(prev), Some(hash)) => check.next(&fields, &prev, &hash),
            (None, _) => Err(ChainBreak::Prev { seq }),
            (_, None) => Err(ChainBreak::Hash { seq }),
        };
        if let Err(broken) = result {
            return Ok(AuditVerdict {
                checked: check.checked(),
                checkpoint,
                head: check.head().seq,
                broken: Some(broken),
            });
        }
    }
    Ok(AuditVerdict {
        checked: check.checked(),
        checkpoint,
        head: check.head().seq,
        broken: None,
    })
}
