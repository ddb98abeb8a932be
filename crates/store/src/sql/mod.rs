//! One SQL surface over both backends: a connection ([`Conn`]) to SQLite or to PostgreSQL, its
//! transactions, statements, parameters and rows. Every statement of the store is written once,
//! in SQL both engines accept, with SQLite's `?N` placeholders (rewritten to `$N` for
//! PostgreSQL); the few places where the dialects differ ask [`Conn::dialect`]. A write
//! transaction holds the whole database on either backend (SQLite's `BEGIN IMMEDIATE`, a
//! cluster-wide advisory lock on PostgreSQL), so the store's transactions mean the same on both.

mod postgres;
mod value;

pub(crate) use postgres::PgConn;
pub(crate) use value::{FromColumn, Stored, ToParam, Value};

use reef_security::audit::AuditKey;

/// What a statement can fail with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Postgres(#[from] crate::pg::PgError),
    /// A query that returns one row returned none.
    #[error("the query returned no rows")]
    NoRows,
    /// A column could not be read as the type asked for.
    #[error("column {index}: {message}")]
    Column { index: usize, message: String },
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

/// Which SQL a connection speaks, for the statements that differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// How a transaction begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransactionBehavior {
    /// Reads see one snapshot; no lock is taken until the first write (SQLite), or at all
    /// (PostgreSQL: a read-only snapshot).
    Deferred,
    /// The database is held for writing from the start, until commit or rollback.
    Immediate,
}

/// A connection to the store's database, with the audit chain's key.
pub(crate) struct Conn {
    link: Link,
    /// The key that chains the audit log; it stays in the process, never in the database.
    pub(crate) audit_key: AuditKey,
}

enum Link {
    Sqlite(rusqlite::Connection),
    Postgres(PgConn),
}

impl Conn {
    pub(crate) fn sqlite(conn: rusqlite::Connection, audit_key: AuditKey) -> Conn {
        Conn {
            link: Link::Sqlite(conn),
            audit_key,
        }
    }

    pub(crate) fn postgres(conn: PgConn, audit_key: AuditKey) -> Conn {
        Conn {
            link: Link::Postgres(conn),
            audit_key,
        }
    }

    pub(crate) fn dialect(&self) -> Dialect {
        match self.link {
            Link::Sqlite(_) => Dialect::Sqlite,
            Link::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The SQLite connection, for what only SQLite has (pragmas, FTS5).
    pub(crate) fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match &self.link {
            Link::Sqlite(conn) => Some(conn),
            Link::Postgres(_) => None,
        }
    }

    /// Makes sure a PostgreSQL connection is open, replacing one the server dropped (a
    /// restart, a network cut) from the pool; SQLite's connection is always open.
    pub(crate) fn revive(&mut self) -> Result<()> {
        match &mut self.link {
            Link::Sqlite(_) => Ok(()),
            Link::Postgres(conn) => conn.revive(),
        }
    }

    /// A statement, prepared once per connection and reused.
    pub(crate) fn prepare_cached(&self, sql: &str) -> Result<Stmt<'_>> {
        match &self.link {
            Link::Sqlite(conn) => Ok(Stmt::Sqlite(conn.prepare_cached(sql)?)),
            Link::Postgres(conn) => Ok(Stmt::Postgres(conn.prepare(sql)?)),
        }
    }

    /// A statement (the same as [`Conn::prepare_cached`]: every statement is cached).
    pub(crate) fn prepare(&self, sql: &str) -> Result<Stmt<'_>> {
        self.prepare_cached(sql)
    }

    /// The first row of one statement, through `f`.
    pub(crate) fn query_row<T, F>(&self, sql: &str, params: &[&dyn ToParam], f: F) -> Result<T>
    where
        F: FnOnce(&Row<'_>) -> Result<T>,
    {
        self.prepare_cached(sql)?.query_row(params, f)
    }

    /// Begins a transaction; it rolls back unless committed.
    pub(crate) fn transaction_with_behavior(
        &self,
        behavior: TransactionBehavior,
    ) -> Result<Tx<'_>> {
        match &self.link {
            Link::Sqlite(conn) => conn.execute_batch(match behavior {
                TransactionBehavior::Deferred => "BEGIN DEFERRED",
                TransactionBehavior::Immediate => "BEGIN IMMEDIATE",
            })?,
            Link::Postgres(conn) => conn.begin(behavior)?,
        }
        Ok(Tx {
            conn: self,
            open: true,
        })
    }

    /// Begins a deferred transaction (a consistent read).
    pub(crate) fn transaction(&self) -> Result<Tx<'_>> {
        self.transaction_with_behavior(TransactionBehavior::Deferred)
    }

    fn finish(&self, sql: &str) -> Result<()> {
        match &self.link {
            Link::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Link::Postgres(conn) => conn.batch(sql),
        }
    }
}

/// An open transaction; statements run on it through `Deref`. Dropped without
/// [`Tx::commit`], it rolls back.
pub(crate) struct Tx<'a> {
    conn: &'a Conn,
    open: bool,
}

impl Tx<'_> {
    pub(crate) fn commit(mut self) -> Result<()> {
        self.open = false;
        self.conn.finish("COMMIT")
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open
            && let Err(err) = self.conn.finish("ROLLBACK")
        {
            // The connection ends the transaction when it closes; nothing was committed.
            tracing::warn!(error = %err, "cannot roll back a store transaction");
        }
    }
}

/// A prepared statement.
pub(crate) enum Stmt<'a> {
    Sqlite(rusqlite::CachedStatement<'a>),
    Postgres(postgres::PgStatement<'a>),
}

impl Stmt<'_> {
    /// Runs it; returns how many rows it changed.
    pub(crate) fn execute(&mut self, params: &[&dyn ToParam]) -> Result<usize> {
        match self {
            Stmt::Sqlite(stmt) => Ok(stmt.execute(sqlite_params(params))?),
            Stmt::Postgres(stmt) => stmt.execute(params),
        }
    }

    /// The first row, through `f`; `Error::NoRows` when there is none.
    pub(crate) fn query_row<T, F>(&mut self, params: &[&dyn ToParam], f: F) -> Result<T>
    where
        F: FnOnce(&Row<'_>) -> Result<T>,
    {
        match self {
            Stmt::Sqlite(stmt) => {
                let mut rows = stmt.query(sqlite_params(params))?;
                match rows.next()? {
                    Some(row) => f(&Row::Sqlite(row)),
                    None => Err(Error::NoRows),
                }
            }
            Stmt::Postgres(stmt) => match stmt.query(params)?.first() {
                Some(row) => f(&Row::Postgres(row)),
                None => Err(Error::NoRows),
            },
        }
    }

    /// Every row, through `f`, in order, stopping at the first error; rows are read one at a
    /// time from SQLite (for scans too big to hold twice).
    pub(crate) fn for_each<E, F>(&mut self, params: &[&dyn ToParam], mut f: F) -> Result<(), E>
    where
        E: From<Error>,
        F: FnMut(&Row<'_>) -> Result<(), E>,
    {
        match self {
            Stmt::Sqlite(stmt) => {
                let mut rows = stmt.query(sqlite_params(params)).map_err(Error::from)?;
                while let Some(row) = rows.next().map_err(Error::from)? {
                    f(&Row::Sqlite(row))?;
                }
            }
            Stmt::Postgres(stmt) => {
                for row in &stmt.query(params)? {
                    f(&Row::Postgres(row))?;
                }
            }
        }
        Ok(())
    }

    /// Every row, through `f`, in order.
    pub(crate) fn query_map<T, F>(
        &mut self,
        params: &[&dyn ToParam],
        mut f: F,
    ) -> Result<std::vec::IntoIter<Result<T>>>
    where
        F: FnMut(&Row<'_>) -> Result<T>,
    {
        let mut out = Vec::new();
        match self {
            Stmt::Sqlite(stmt) => {
                let mut rows = stmt.query(sqlite_params(params))?;
                while let Some(row) = rows.next()? {
                    out.push(f(&Row::Sqlite(row)));
                }
            }
            Stmt::Postgres(stmt) => {
                for row in &stmt.query(params)? {
                    out.push(f(&Row::Postgres(row)));
                }
            }
        }
        Ok(out.into_iter())
    }
}

fn sqlite_params<'a>(
    params: &'a [&'a dyn ToParam],
) -> rusqlite::ParamsFromIter<impl Iterator<Item = Value<'a>>> {
    rusqlite::params_from_iter(params.iter().map(|p| p.to_param()))
}

/// One row of a result.
pub(crate) enum Row<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    Postgres(&'a tokio_postgres::Row),
}

impl Row<'_> {
    /// Column `index` as a `T`.
    pub(crate) fn get<T: FromColumn>(&self, index: usize) -> Result<T> {
        match self {
            Row::Sqlite(row) => Ok(T::from_sqlite(row, index)?),
            Row::Postgres(row) => T::from_postgres(row, index),
        }
    }
}

/// `Error::NoRows` as `None`.
pub(crate) trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(Error::NoRows) => Ok(None),
            Err(err) => Err(err),
        }
    }
}

/// The parameters of a statement, in order: `params![a, b]`.
macro_rules! params {
    () => {
        &[] as &[&dyn $crate::sql::ToParam]
    };
    ($($param:expr),+ $(,)?) => {
        &[$(&$param as &dyn $crate::sql::ToParam),+] as &[&dyn $crate::sql::ToParam]
    };
}
pub(crate) use params;
