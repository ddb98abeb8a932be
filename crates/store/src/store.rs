//! The `Store` handle: opening and configuring the SQLite file, migrations, and running SQL
//! off the async runtime.

use crate::clock::Clock;
use crate::error::StoreError;
use crate::key_file::{KeyError, KeyKind};
use crate::migrations::MIGRATIONS;
use reef_core::SessionId;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long a write waits for another connection's lock before failing with "database is busy".
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The connection plus the timestamp source, guarded together so timestamps follow commit order.
pub(crate) struct Db {
    pub(crate) conn: Connection,
    pub(crate) clock: Clock,
    /// Memory vectors held in RAM for scanning; loaded on the first vector search.
    pub(crate) vectors: crate::vectors::SharedIndex,
    /// How the vector index has been brought up to date.
    pub(crate) vector_loads: crate::vectors::VectorLoads,
    /// The audit chain's key (`audit.key` beside the database).
    pub(crate) audit_key: reef_security::audit::AuditKey,
}

/// The keys a store opens with.
struct Keys {
    audit: reef_security::audit::AuditKey,
    cap_root: reef_security::cap::RootKey,
}

/// A handle to reef's SQLite database. Cheap to clone; clones share one connection.
/// Every async method runs its SQL on tokio's blocking pool, and every write is its own
/// committed transaction.
#[derive(Clone)]
pub struct Store {
    db: Arc<Mutex<Db>>,
    /// A second, read-only connection to a database file, for searches that should not
    /// wait behind the writer (WAL lets it read beside it); `None` in memory.
    reader: Option<Arc<Mutex<Connection>>>,
    path: Option<Arc<PathBuf>>,
    /// The root of capability tokens (`cap.key` beside the database).
    cap_root: Arc<reef_security::cap::RootKey>,
    /// How many chunks hold each word, as searches counted them.
    pub(crate) word_counts: Arc<Mutex<crate::word_counts::WordCounts>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path`: creates the parent directory, makes
    /// the database and its journal files readable by the user alone (mode 0600), turns on
    /// WAL with `synchronous=NORMAL`, foreign keys and a 5 s busy timeout, and migrates the
    /// schema to the latest version. Errors name the path.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::CreateDir {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        let tightened =
            crate::private::make_private(path).map_err(|source| StoreError::Permissions {
                path: path.to_path_buf(),
                source,
            })?;
        for file in tightened {
            tracing::warn!(
                "made {} private (mode 0600): it was readable by other users of this machine",
                file.display()
            );
        }
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        let key_path = crate::key_file::audit_key_path(path);
        let (key, made) = crate::key_file::load_or_create(&key_path, KeyKind::Audit)?;
        let cap_path = crate::key_file::cap_key_path(path);
        let (cap_secret, cap_made) =
            crate::key_file::load_or_create(&cap_path, KeyKind::CapabilityRoot)?;
        let cap_root = cap_root(&cap_secret, &cap_path)?;
        let conn = Connection::open(path).map_err(open_err)?;
        configure(&conn, true).map_err(open_err)?;
        let keys = Keys {
            audit: reef_security::audit::AuditKey::from_bytes(key),
            cap_root,
        };
        let mut store = Self::finish(conn, Some(path.to_path_buf()), keys)?;
        let reader = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        configure(&reader, false).map_err(open_err)?;
        store.reader = Some(Arc::new(Mutex::new(reader)));
        // A new key for a log that has records would make every record look forged, and would
        // let anyone who deletes the key start the chain afresh.
        if made && store.has_audit_records()? {
            if let Err(err) = std::fs::remove_file(&key_path) {
                tracing::warn!(path = %key_path.display(), error = %err, "cannot remove a key just made");
            }
            return Err(crate::key_file::KeyError::Missing { path: key_path }.into());
        }
        if cap_made && store.any_agent_token()? {
            tracing::warn!(
                path = %cap_path.display(),
                "a new capability root key was made, but agents hold tokens minted under the old \
                 one: their calls are refused until `reef cap grant AGENT` mints new ones (or the \
                 old key is restored)"
            );
        }
        Ok(store)
    }

    /// A private database that lives as long as the store (for tests and dry runs).
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let open_err = |source| StoreError::Open {
            path: PathBuf::from(":memory:"),
            source,
        };
        let conn = Connection::open_in_memory().map_err(open_err)?;
        configure(&conn, false).map_err(open_err)?;
        let keys = Keys {
            audit: reef_security::audit::AuditKey::from_bytes(crate::key_file::ephemeral()?),
            cap_root: cap_root(&crate::key_file::ephemeral()?, Path::new(":memory:"))?,
        };
        Self::finish(conn, None, keys)
    }

    fn finish(
        mut conn: Connection,
        path: Option<PathBuf>,
        keys: Keys,
    ) -> Result<Store, StoreError> {
        MIGRATIONS
            .to_latest(&mut conn)
            .map_err(|source| StoreError::Migration {
                path: path.clone().unwrap_or_else(|| PathBuf::from(":memory:")),
                source,
            })?;
        crate::audit::install_link(&conn, keys.audit.clone()).map_err(|source| {
            StoreError::Open {
                path: path.clone().unwrap_or_else(|| PathBuf::from(":memory:")),
                source,
            }
        })?;
        Ok(Store {
            db: Arc::new(Mutex::new(Db {
                conn,
                clock: Clock::default(),
                vectors: Arc::default(),
                vector_loads: crate::vectors::VectorLoads::default(),
                audit_key: keys.audit,
            })),
            reader: None,
            path: path.map(Arc::new),
            cap_root: Arc::new(keys.cap_root),
            word_counts: Arc::default(),
        })
    }

    /// The root key that mints and verifies capability tokens.
    pub fn capability_root(&self) -> &reef_security::cap::RootKey {
        &self.cap_root
    }

    /// The database file, or `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref().map(PathBuf::as_path)
    }

    /// Whether the audit log has records or a pruning checkpoint.
    fn has_audit_records(&self) -> Result<bool, StoreError> {
        let db = self.lock();
        db.conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM audit) OR EXISTS (SELECT 1 FROM audit_checkpoint)",
            )?
            .query_row([], |r| r.get(0))
            .map_err(|e| self.query_error(e))
    }

    /// The number of migrations applied to the database.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        let db = self.lock();
        let version: i64 = db
            .conn
            .prepare_cached("PRAGMA user_version")?
            .query_row([], |r| r.get(0))
            .map_err(|e| self.query_error(e))?;
        u32::try_from(version)
            .map_err(|_| StoreError::Corrupt(format!("schema version {version} is out of range")))
    }

    /// A query error naming the database (`:memory:` for an in-memory store).
    fn query_error(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Query {
            path: self
                .path()
                .map_or_else(|| PathBuf::from(":memory:"), Path::to_path_buf),
            source,
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Db> {
        // A panic inside a closure cannot leave a transaction open (it rolls back on drop),
        // so the connection is still usable after poisoning.
        self.db.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` with exclusive access to the connection on the blocking pool.
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, StoreError> + Send + 'static,
    {
        let store = self.clone();
        let result = tokio::task::spawn_blocking(move || {
            let mut db = store.lock();
            f(&mut db)
        })
        .await?;
        result.map_err(|err| self.named(err))
    }

    /// Runs the read-only `f` on the blocking pool, on the reader connection when there is one
    /// (so it runs beside the writer) and otherwise on the connection.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let Some(reader) = self.reader.clone() else {
            return self.run(move |db| f(&db.conn)).await;
        };
        let result = tokio::task::spawn_blocking(move || {
            let conn = reader.lock().unwrap_or_else(PoisonError::into_inner);
            f(&conn)
        })
        .await?;
        result.map_err(|err| self.named(err))
    }

    /// A SQLite error as a query error naming the database; other errors as they are.
    fn named(&self, err: StoreError) -> StoreError {
        match err {
            StoreError::Sqlite(source) => self.query_error(source),
            other => other,
        }
    }
}

fn configure(conn: &Connection, file: bool) -> rusqlite::Result<()> {
    if file {
        // Reading the mode back touches the file header, so a non-SQLite file fails here.
        let _mode: String = conn
            .prepare_cached("PRAGMA journal_mode = WAL")?
            .query_row([], |r| r.get(0))?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
    }
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(())
}

/// Fails with `NotFound` unless the session exists.
pub(crate) fn ensure_session(conn: &Connection, id: &SessionId) -> Result<(), StoreError> {
    let found: Option<i64> = conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .query_row(params![id.as_str()], |r| r.get(0))
        .optional()?;
    match found {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound(format!("session {id}"))),
    }
}

/// The session's last message seq; 0 when it has none (or does not exist).
pub(crate) fn last_seq(conn: &Connection, session: &SessionId) -> Result<u64, StoreError> {
    let last: Option<i64> = conn
        .prepare_cached("SELECT MAX(seq) FROM messages WHERE session_id = ?1")?
        .query_row(params![session.as_str()], |r| r.get(0))?;
    from_sql_int(
        last.unwrap_or(0),
        &format!("last message seq of session {session}"),
    )
}

/// Converts a count for SQLite (which stores signed 64-bit integers), saturating.
pub(crate) fn to_sql_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Converts a stored integer back, rejecting negatives as corrupt.
pub(crate) fn from_sql_int(v: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what} is negative ({v})")))
}

fn cap_root(secret: &[u8; 32], path: &Path) -> Result<reef_security::cap::RootKey, StoreError> {
    reef_security::cap::RootKey::from_secret(secret).map_err(|_| {
        StoreError::Key(KeyError::Malformed {
            kind: KeyKind::CapabilityRoot,
            path: path.to_path_buf(),
        })
    })
}
