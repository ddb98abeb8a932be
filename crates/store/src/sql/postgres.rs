//! The SQL surface on PostgreSQL: one pooled connection used from the store's blocking threads
//! (each call waits on the async client through the runtime's handle), placeholders rewritten
//! from `?N` to `$N`, and write transactions serialized cluster-wide by an advisory lock, as
//! SQLite's single writer serializes them on one machine.

use super::{Error, Result, ToParam, TransactionBehavior, Value};
use crate::pg::PgError;
use std::sync::Arc;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{Kind, ToSql, Type};

/// The advisory lock every write transaction holds until it ends ("reefw" in ASCII).
const WRITE_LOCK: i64 = 0x72_6565_6677;

/// A connection from the pool, used from a blocking thread.
pub(crate) struct PgConn {
    client: deadpool_postgres::Object,
    pool: deadpool_postgres::Pool,
    handle: tokio::runtime::Handle,
    target: Arc<str>,
}

impl PgConn {
    /// Wraps a pooled connection; `handle` is the runtime its I/O runs on.
    pub(crate) fn new(
        client: deadpool_postgres::Object,
        pool: deadpool_postgres::Pool,
        handle: tokio::runtime::Handle,
        target: Arc<str>,
    ) -> PgConn {
        PgConn {
            client,
            pool,
            handle,
            target,
        }
    }

    fn query_error(&self, source: tokio_postgres::Error) -> Error {
        Error::Postgres(PgError::Query {
            target: self.target.to_string(),
            source,
        })
    }

    /// Replaces a connection the server closed with a new one from the pool.
    pub(crate) fn revive(&mut self) -> Result<()> {
        if !self.client.is_closed() {
            return Ok(());
        }
        let client = self.handle.block_on(self.pool.get()).map_err(|e| {
            Error::Postgres(match e {
                deadpool_postgres::PoolError::Backend(source) => PgError::Connect {
                    target: self.target.to_string(),
                    source,
                },
                other => PgError::Pool {
                    target: self.target.to_string(),
                    message: other.to_string(),
                },
            })
        })?;
        self.client = client;
        Ok(())
    }

    /// Prepares `sql` (cached per connection). A statement whose placeholders PostgreSQL
    /// cannot type from the SQL alone (`?1 IS NULL OR …`) is typed from its parameters when
    /// it runs.
    pub(crate) fn prepare(&self, sql: &str) -> Result<PgStatement<'_>> {
        // SQLite's `CROSS JOIN … ON` (a join with its order fixed) is a plain join here.
        let sql = json_functions(&placeholders(sql)).replace("CROSS JOIN ", "JOIN ");
        let statement = match self.handle.block_on(self.client.prepare_cached(&sql)) {
            Ok(statement) => Some(statement),
            Err(e)
                if matches!(
                    e.code(),
                    Some(&SqlState::INDETERMINATE_DATATYPE | &SqlState::AMBIGUOUS_PARAMETER)
                ) =>
            {
                None
            }
            Err(e) => return Err(self.query_error(e)),
        };
        Ok(PgStatement {
            conn: self,
            sql,
            statement,
        })
    }

    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        self.handle
            .block_on(self.client.batch_execute(sql))
            .map_err(|e| self.query_error(e))
    }

    pub(crate) fn begin(&self, behavior: TransactionBehavior) -> Result<()> {
        match behavior {
            // A snapshot, as a SQLite transaction reads one.
            TransactionBehavior::Deferred => self.batch("BEGIN ISOLATION LEVEL REPEATABLE READ"),
            TransactionBehavior::Immediate => self.batch(&format!(
                "BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})"
            )),
        }
    }
}

/// A statement prepared on a [`PgConn`].
pub(crate) struct PgStatement<'a> {
    conn: &'a PgConn,
    sql: String,
    /// `None` until typed from the first parameters it runs with.
    statement: Option<tokio_postgres::Statement>,
}

impl PgStatement<'_> {
    /// The statement for `values`: as prepared, or typed from the values (a NULL left for
    /// PostgreSQL to infer).
    fn typed(&self, values: &[Value<'_>]) -> Result<tokio_postgres::Statement> {
        if let Some(statement) = &self.statement {
            return Ok(statement.clone());
        }
        let types: Vec<Type> = values
            .iter()
            .map(|v| match v {
                Value::Null => Type::new(String::new(), 0, Kind::Simple, String::new()),
                Value::Text(_) => Type::TEXT,
                Value::Int(_) => Type::INT8,
                Value::Real(_) => Type::FLOAT8,
                Value::Bool(_) => Type::BOOL,
                Value::Blob(_) => Type::BYTEA,
            })
            .collect();
        self.conn
            .handle
            .block_on(self.conn.client.prepare_typed_cached(&self.sql, &types))
            .map_err(|e| self.conn.query_error(e))
    }

    pub(crate) fn execute(&self, params: &[&dyn ToParam]) -> Result<usize> {
        let values: Vec<Value<'_>> = params.iter().map(|p| p.to_param()).collect();
        let statement = self.typed(&values)?;
        let refs: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let n = self
            .conn
            .handle
            .block_on(self.conn.client.execute(&statement, &refs))
            .map_err(|e| self.conn.query_error(e))?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    pub(crate) fn query(&self, params: &[&dyn ToParam]) -> Result<Vec<tokio_postgres::Row>> {
        let values: Vec<Value<'_>> = params.iter().map(|p| p.to_param()).collect();
        let statement = self.typed(&values)?;
        let refs: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        self.conn
            .handle
            .block_on(self.conn.client.query(&statement, &refs))
            .map_err(|e| self.conn.query_error(e))
    }
}

/// `sql` with SQLite's placeholders (`?1`, or `?` numbered in order) as PostgreSQL's (`$1`);
/// question marks inside quoted strings and identifiers stay as they are.
pub(crate) fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    let mut next = 0_u32;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), c) => out.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                out.push(c);
            }
            (None, '?') => {
                out.push('$');
                let mut digits = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    digits.push(d);
                    chars.next();
                }
                if digits.is_empty() {
                    next += 1;
                    out.push_str(&next.to_string());
                } else {
                    next = digits.parse().unwrap_or(next);
                    out.push_str(&digits);
                }
            }
            (None, c) => out.push(c),
        }
    }
    out
}

/// `sql` with SQLite's JSON functions as PostgreSQL's: `json_each(X)` (the elements of an
/// array, in a column `value`) as `json_array_elements_text(CAST(X AS JSON))`, the two-argument
/// `json_each(X, '$.key')` on the array under `key`, and `json_extract(X, '$.key')` as
/// `(CAST(X AS JSON) ->> 'key')`.
pub(crate) fn json_functions(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 32);
    let mut rest = sql;
    loop {
        let each = rest.find("json_each(");
        let extract = rest.find("json_extract(");
        let (at, name) = match (each, extract) {
            (Some(e), Some(x)) if x < e => (x, "json_extract("),
            (Some(e), _) => (e, "json_each("),
            (None, Some(x)) => (x, "json_extract("),
            (None, None) => break,
        };
        out.push_str(&rest[..at]);
        let args_start = at + name.len();
        let Some(len) = closing(&rest[args_start..]) else {
            // Unbalanced: left for PostgreSQL to report.
            out.push_str(&rest[at..]);
            return out;
        };
        let args = &rest[args_start..args_start + len];
        let (value, path) = match args.split_once(',') {
            Some((value, path)) => (value.trim(), Some(path.trim())),
            None => (args.trim(), None),
        };
        let key = path.map(|p| p.trim_matches('\'').trim_start_matches("$.").to_owned());
        let json = format!("CAST({value} AS JSON)");
        let json = match (&key, name) {
            (Some(key), "json_each(") => format!("{json} -> '{key}'"),
            _ => json,
        };
        match (name, key) {
            ("json_extract(", Some(key)) => out.push_str(&format!("({json} ->> '{key}')")),
            _ => out.push_str(&format!("json_array_elements_text({json})")),
        }
        rest = &rest[args_start + len + 1..];
    }
    out.push_str(rest);
    out
}

/// The length of `s` up to the `)` that closes an already open parenthesis.
fn closing(s: &str) -> Option<usize> {
    let mut depth = 0_u32;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(i),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{json_functions, placeholders};

    #[test]
    fn sqlite_json_functions_become_postgres_ones() {
        assert_eq!(
            json_functions("WHERE ns IN (SELECT value FROM json_each(?2)) AND x"),
            "WHERE ns IN (SELECT value FROM json_array_elements_text(CAST(?2 AS JSON))) AND x"
        );
        assert_eq!(
            json_functions(
                "SELECT j.value, json_extract(a.data, '$.tool') FROM audit a, json_each(a.data, '$.names') j"
            ),
            "SELECT j.value, (CAST(a.data AS JSON) ->> 'tool') FROM audit a, \
             json_array_elements_text(CAST(a.data AS JSON) -> 'names') j"
        );
        assert_eq!(json_functions("SELECT 1"), "SELECT 1");
    }

    #[test]
    fn placeholders_are_numbered_outside_quotes() {
        assert_eq!(
            placeholders("SELECT a FROM t WHERE b = ?1 AND c = ?12 AND d = '?3' AND \"e?\" = ?"),
            "SELECT a FROM t WHERE b = $1 AND c = $12 AND d = '?3' AND \"e?\" = $13"
        );
        assert_eq!(placeholders("VALUES (?, ?, ?)"), "VALUES ($1, $2, $3)");
    }
}
