//! `StoreError`: every way the store can fail, each saying how to recover.

use std::path::PathBuf;

/// A failure of the store. The message names what to check or do next.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The parent directory of the database file could not be created.
    #[error(
        "cannot create the directory for the store at {}: {source}; check permissions or choose another path",
        path.display()
    )]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The database file could not be created, or made private (mode 0600): check that the
    /// user running reef owns it.
    #[error("cannot make {} private (mode 0600): {source}", path.display())]
    Permissions {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The database file could not be opened or configured (not a SQLite file, unreadable, …).
    #[error(
        "cannot open the store at {}: {source}; check that the path is a reef SQLite database you can write to, or move it aside",
        path.display()
    )]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// The audit log's key could not be read or made; the message says what to fix.
    #[error(transparent)]
    Key(#[from] crate::key_file::KeyError),
    /// The schema could not be brought to the latest version.
    #[error(
        "cannot migrate the store at {}: {source}; if it was written by a newer reef, upgrade reef, otherwise restore a backup",
        path.display()
    )]
    Migration {
        path: PathBuf,
        #[source]
        source: rusqlite_migration::Error,
    },
    /// A query failed; usually transient (busy, disk full) — retry or free disk space.
    #[error("store query failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A query on the database file at `path` failed; usually transient (busy, disk full) —
    /// retry or free disk space.
    #[error("store query on {} failed: {source}", path.display())]
    Query {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// The named thing does not exist; check the id (`reef sessions` lists them).
    #[error("not found: {0}")]
    NotFound(String),
    /// A session id prefix matched more than one session; type more characters.
    #[error(
        "session prefix '{prefix}' is ambiguous: it matches {matches} sessions; use a longer prefix"
    )]
    Ambiguous { prefix: String, matches: usize },
    /// The write would break a uniqueness rule (e.g. an agent name in use); pick another value.
    #[error("{0}")]
    Conflict(String),
    /// The agent's current state does not allow the requested change; read its state and
    /// ask for a transition the lifecycle has.
    #[error(transparent)]
    InvalidTransition(#[from] reef_core::InvalidTransition),
    /// An argument is out of range or malformed; `field` names it.
    #[error("invalid {field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// A stored row could not be decoded; the database was edited by hand or is damaged.
    #[error("corrupt row in the store: {0}; repair or delete the row")]
    Corrupt(String),
    /// PostgreSQL failed (cluster mode); the message says whether to retry or what to fix.
    #[error(transparent)]
    Postgres(#[from] crate::pg::PgError),
    /// The operation (`at`) is not available on PostgreSQL yet; run it outside cluster mode.
    #[error("{at} is not available in cluster mode (on PostgreSQL) yet")]
    NotOnPostgres { at: String },
    /// A query that returns one row returned none, where the store expected one.
    #[error("the store found no row where it expected one: {0}")]
    NoRow(String),
    /// The blocking database task panicked or was cancelled (the runtime is shutting down).
    #[error("store task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl StoreError {
    /// Whether the database could not be reached or was busy, so that the same call may
    /// succeed later unchanged: PostgreSQL down, restarting or dropping the connection, the
    /// pool exhausted, SQLite busy, locked, out of disk or failing I/O. Anything else (a
    /// conflict, bad input, a damaged row) fails the same way again.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Postgres(err) => err.is_unavailable(),
            StoreError::Sqlite(err) | StoreError::Query { source: err, .. } => {
                matches!(
                    err.sqlite_error_code(),
                    Some(
                        rusqlite::ErrorCode::DatabaseBusy
                            | rusqlite::ErrorCode::DatabaseLocked
                            | rusqlite::ErrorCode::DiskFull
                            | rusqlite::ErrorCode::SystemIoFailure
                    )
                )
            }
            _ => false,
        }
    }
}

impl From<crate::sql::Error> for StoreError {
    fn from(err: crate::sql::Error) -> StoreError {
        match err {
            crate::sql::Error::Sqlite(source) => StoreError::Sqlite(source),
            crate::sql::Error::Postgres(source) => StoreError::Postgres(source),
            crate::sql::Error::NoRows => StoreError::NoRow("a query returned no rows".into()),
            crate::sql::Error::Column { index, message } => {
                StoreError::Corrupt(format!("column {index}: {message}"))
            }
        }
    }
}
