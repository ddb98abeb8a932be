//! Copying a SQLite store into an empty PostgreSQL one (`reef migrate --to postgres`): every
//! table, in an order its foreign keys allow, in one PostgreSQL transaction; then the identity
//! sequences moved past the copied ids, and each table's rows counted on both sides.

use crate::error::StoreError;
use crate::sql::{Conn, Dialect, Stored, ToParam, TransactionBehavior, params};
use crate::store::Store;

/// Every table of the store, parents before the tables that refer to them (the order of
/// PostgreSQL's baseline migration). SQLite's FTS5 tables are not copied: PostgreSQL
/// indexes a column of the table itself.
pub(crate) const TABLES: &[&str] = &[
    "sessions",
    "messages",
    "model_usage",
    "agents",
    "inbox",
    "events",
    "rooms",
    "room_members",
    "memory_items",
    "memory_chunks",
    "secret_fingerprints",
    "compactions",
    "pending",
    "hook_deliveries",
    "routines",
    "jobs",
    "routine_fires",
    "scheduler_cursor",
    "audit",
    "audit_checkpoint",
    "cap_revoked",
    "api_tokens",
    "channel_cursors",
];

/// What a copy moved: rows per table, in the order copied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Copied {
    pub table: &'static str,
    pub rows: u64,
}

impl Store {
    /// Copies this SQLite store into `target`, a PostgreSQL store holding no agent, session,
    /// event or audit record yet, in one transaction; then checks that every table holds as
    /// many rows on both sides. A failure leaves `target` as it was.
    pub async fn copy_to_postgres(&self, target: &Store) -> Result<Vec<Copied>, StoreError> {
        let (source, target) = (self.clone(), target.clone());
        tokio::task::spawn_blocking(move || {
            let from = source.lock();
            let mut to = target.lock();
            to.conn.revive()?;
            if from.conn.dialect() != Dialect::Sqlite || to.conn.dialect() != Dialect::Postgres {
                return Err(StoreError::Invalid {
                    field: "target",
                    message: "a copy goes from a SQLite store to a PostgreSQL one".into(),
                });
            }
            refuse_unless_empty(&to.conn)?;
            let tx = to
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            // The rooms every store starts with are there already.
            tx.prepare_cached("DELETE FROM rooms")?.execute(params![])?;
            let mut copied = Vec::with_capacity(TABLES.len());
            for table in TABLES {
                let rows = copy_table(&from.conn, &tx, table)?;
                copied.push(Copied { table, rows });
            }
            move_identities(&tx)?;
            if to.pgvector {
                crate::vectors_pgvector::fill(&tx)?;
            }
            tx.commit()?;
            for Copied { table, rows } in &copied {
                let there = count(&to.conn, table)?;
                if there != *rows {
                    return Err(StoreError::Conflict(format!(
                        "table {table}: {rows} rows copied but PostgreSQL holds {there}; the \
                         copy is not complete"
                    )));
                }
            }
            Ok(copied)
        })
        .await?
    }
}

fn count(conn: &Conn, table: &str) -> Result<u64, StoreError> {
    let n: i64 = conn
        .prepare_cached(&format!("SELECT count(*) FROM {table}"))?
        .query_row(params![], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

fn refuse_unless_empty(conn: &Conn) -> Result<(), StoreError> {
    for table in ["agents", "sessions", "events", "audit", "memory_items"] {
        if count(conn, table)? > 0 {
            return Err(StoreError::Conflict(format!(
                "the PostgreSQL database already holds reef data ({table} is not empty): \
                 copy into an empty database"
            )));
        }
    }
    Ok(())
}

/// Copies `table`'s rows, the columns SQLite has (PostgreSQL's generated ones fill in).
fn copy_table(from: &Conn, to: &Conn, table: &str) -> Result<u64, StoreError> {
    let Some(sqlite) = from.as_sqlite() else {
        return Err(StoreError::Invalid {
            field: "source",
            message: "not a SQLite store".into(),
        });
    };
    let columns: Vec<String> = sqlite
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if columns.is_empty() {
        return Err(StoreError::Corrupt(format!(
            "the SQLite store has no table {table}"
        )));
    }
    let list = columns
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let placeholders = (1..=columns.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let insert = format!("INSERT INTO {table} ({list}) VALUES ({placeholders})");
    let mut rows = 0_u64;
    from.prepare_cached(&format!("SELECT {list} FROM {table}"))?
        .for_each(params![], |row| {
            let values: Vec<Stored> = (0..columns.len())
                .map(|i| row.get(i))
                .collect::<Result<_, _>>()?;
            let params: Vec<&dyn ToParam> = values.iter().map(|v| v as &dyn ToParam).collect();
            to.prepare_cached(&insert)?.execute(&params)?;
            rows += 1;
            Ok::<(), StoreError>(())
        })?;
    Ok(rows)
}

/// Moves every identity sequence past the largest id copied, so new rows get new ids.
fn move_identities(tx: &Conn) -> Result<(), StoreError> {
    let identities: Vec<(String, String)> = tx
        .prepare_cached(
            "SELECT table_name::text, column_name::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND is_identity = 'YES'",
        )?
        .query_map(params![], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (table, column) in identities {
        tx.prepare_cached(&format!(
            "SELECT setval(pg_get_serial_sequence('{table}', '{column}'),
                           coalesce(max(\"{column}\"), 0) + 1, false) FROM {table}"
        ))?
        .query_row(params![], |_| Ok(()))?;
    }
    Ok(())
}
