//! The `Store` handle: opening and configuring the SQLite file or connecting to PostgreSQL,
//! migrations, and running SQL off the async runtime.

use crate::clock::Clock;
use crate::error::StoreError;
use crate::key_file::{KeyError, KeyKind};
use crate::migrations::MIGRATIONS;
use crate::pg::PgStore;
use crate::sql::{Conn, OptionalExtension, params};
use reef_core::SessionId;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long a write waits for another connection's lock before failing with "database is busy".
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The connection plus the timestamp source, guarded together so timestamps follow commit order.
pub(crate) struct Db {
    pub(crate) conn: Conn,
    pub(crate) clock: Clock,
    /// Memory vectors held in RAM for scanning; loaded on the first vector search.
    pub(crate) vectors: crate::vectors::SharedIndex,
    /// How the vector index has been brought up to date.
    pub(crate) vector_loads: crate::vectors::VectorLoads,
    /// Vectors are kept and searched by pgvector in the database, not in RAM.
    pub(crate) pgvector: bool,
}

impl Db {
    fn new(conn: Conn) -> Db {
        Db {
            conn,
            clock: Clock::default(),
            vectors: Arc::default(),
            vector_loads: crate::vectors::VectorLoads::default(),
            pgvector: false,
        }
    }
}

/// The keys a store opens with.
struct Keys {
    audit: reef_security::audit::AuditKey,
    cap_root: reef_security::cap::RootKey,
}

/// A handle to reef's database: a SQLite file (the default), or PostgreSQL shared by the nodes
/// of a cluster. Cheap to clone; clones share one connection. Every method runs its SQL on
/// tokio's blocking pool, and every write is its own committed transaction.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
    /// The root of capability tokens (`cap.key` beside the database, or in the node's home).
    cap_root: Arc<reef_security::cap::RootKey>,
}

struct Inner {
    db: Mutex<Db>,
    /// A second, read-only connection to a database file, for searches that should not
    /// wait behind the writer (WAL lets it read beside it); `None` in memory and on
    /// PostgreSQL.
    reader: Option<Mutex<Conn>>,
    /// The SQLite file; `None` in memory and on PostgreSQL.
    path: Option<PathBuf>,
    /// The PostgreSQL pool, in cluster mode.
    postgres: Option<PgStore>,
    /// How many chunks hold each word, as searches counted them.
    word_counts: Arc<Mutex<crate::word_counts::WordCounts>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner.postgres {
            Some(pg) => f
                .debug_struct("Store")
                .field("postgres", &pg.target())
                .finish(),
            None => f
                .debug_struct("Store")
                .field("path", &self.inner.path)
                .finish(),
        }
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
        let reader = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(open_err)?;
        configure(&reader, false).map_err(open_err)?;
        let store = Self::finish(conn, Some(reader), Some(path.to_path_buf()), keys)?;
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
        Self::finish(conn, None, None, keys)
    }

    fn finish(
        mut conn: Connection,
        reader: Option<Connection>,
        path: Option<PathBuf>,
        keys: Keys,
    ) -> Result<Store, StoreError> {
        MIGRATIONS
            .to_latest(&mut conn)
            .map_err(|source| StoreError::Migration {
                path: path.clone().unwrap_or_else(|| PathBuf::from(":memory:")),
                source,
            })?;
        let inner = Inner {
            db: Mutex::new(Db::new(Conn::sqlite(conn, keys.audit.clone()))),
            reader: reader.map(|reader| Mutex::new(Conn::sqlite(reader, keys.audit))),
            path,
            postgres: None,
            word_counts: Arc::default(),
        };
        Ok(Store {
            inner: Arc::new(inner),
            cap_root: Arc::new(keys.cap_root),
        })
    }

    /// Connects to reef's PostgreSQL database at `url` (cluster mode), logging in with
    /// `password` when given, and migrates it. The audit and capability keys are the files
    /// `audit.key` and `cap.key` in `key_dir` (the node's home): every node of a cluster needs
    /// the same two files, so a node that would make a new audit key for a log that already
    /// has records refuses to start instead of making every record look forged.
    pub async fn connect_postgres(
        url: &str,
        password: Option<&str>,
        key_dir: &Path,
    ) -> Result<Store, StoreError> {
        let pg = PgStore::connect(url, password).await?;
        let audit_path = key_dir.join(crate::key_file::AUDIT_KEY_FILE);
        let cap_path = key_dir.join(crate::key_file::CAP_KEY_FILE);
        let (audit, made) = crate::key_file::load_or_create(&audit_path, KeyKind::Audit)?;
        let (cap_secret, _) = crate::key_file::load_or_create(&cap_path, KeyKind::CapabilityRoot)?;
        let conn = pg.blocking_conn().await?;
        let mut db = Db::new(Conn::postgres(
            conn,
            reef_security::audit::AuditKey::from_bytes(audit),
        ));
        let pgvector = pg.pgvector().is_some();
        db.pgvector = pgvector;
        let inner = Inner {
            db: Mutex::new(db),
            reader: None,
            path: None,
            postgres: Some(pg),
            word_counts: Arc::default(),
        };
        let store = Store {
            inner: Arc::new(inner),
            cap_root: Arc::new(cap_root(&cap_secret, &cap_path)?),
        };
        let probe = store.clone();
        let has_records = tokio::task::spawn_blocking(move || probe.has_audit_records()).await??;
        if pgvector {
            let filler = store.clone();
            let filled = tokio::task::spawn_blocking(move || {
                crate::vectors_pgvector::fill(&filler.lock().conn)
            })
            .await??;
            if filled > 0 {
                tracing::info!(
                    filled,
                    "vectors stored without pgvector's column were given it"
                );
            }
        }
        if made && has_records {
            if let Err(err) = std::fs::remove_file(&audit_path) {
                tracing::warn!(path = %audit_path.display(), error = %err, "cannot remove a key just made");
            }
            return Err(KeyError::Missing { path: audit_path }.into());
        }
        Ok(store)
    }

    /// The PostgreSQL store behind this handle, in cluster mode.
    pub fn postgres(&self) -> Option<&PgStore> {
        self.inner.postgres.as_ref()
    }

    /// The root key that mints and verifies capability tokens.
    pub fn capability_root(&self) -> &reef_security::cap::RootKey {
        &self.cap_root
    }

    /// The database file, or `None` for an in-memory store or PostgreSQL.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Whether the audit log has records or a pruning checkpoint.
    fn has_audit_records(&self) -> Result<bool, StoreError> {
        let mut db = self.lock();
        db.conn.revive()?;
        db.conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM audit) OR EXISTS (SELECT 1 FROM audit_checkpoint)",
            )?
            .query_row(params![], |r| r.get(0))
            .map_err(|e| self.inner.named(e.into()))
    }

    /// The number of migrations applied to the database.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        let db = self.lock();
        let Some(conn) = db.conn.as_sqlite() else {
            return Err(StoreError::NotOnPostgres {
                at: "the SQLite schema version (PgStore::schema_version has PostgreSQL's)".into(),
            });
        };
        let version: i64 = conn
            .prepare_cached("PRAGMA user_version")?
            .query_row([], |r| r.get(0))
            .map_err(|e| self.inner.named(StoreError::Sqlite(e)))?;
        u32::try_from(version)
            .map_err(|_| StoreError::Corrupt(format!("schema version {version} is out of range")))
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Db> {
        // A panic inside a closure cannot leave a transaction open (it rolls back on drop),
        // so the connection is still usable after poisoning.
        self.inner.db.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many chunks hold each word, as searches counted them.
    pub(crate) fn word_counts(&self) -> Arc<Mutex<crate::word_counts::WordCounts>> {
        Arc::clone(&self.inner.word_counts)
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
            db.conn.revive()?;
            f(&mut db)
        })
        .await?;
        result.map_err(|err| self.inner.named(err))
    }

    /// Runs the read-only `f` on the blocking pool, on the reader connection when there is one
    /// (so it runs beside the writer) and otherwise on the connection.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Conn) -> Result<T, StoreError> + Send + 'static,
    {
        let store = self.clone();
        let result = tokio::task::spawn_blocking(move || match &store.inner.reader {
            Some(reader) => f(&reader.lock().unwrap_or_else(PoisonError::into_inner)),
            None => {
                let mut db = store.lock();
                db.conn.revive()?;
                f(&db.conn)
            }
        })
        .await?;
        result.map_err(|err| self.inner.named(err))
    }
}

impl Inner {
    /// A SQLite error as a query error naming the database; other errors as they are.
    fn named(&self, err: StoreError) -> StoreError {
        match err {
            StoreError::Sqlite(source) => StoreError::Query {
                path: self
                    .path
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(":memory:")),
                source,
            },
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
pub(crate) fn ensure_session(conn: &Conn, id: &SessionId) -> Result<(), StoreError> {
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
pub(crate) fn last_seq(conn: &Conn, session: &SessionId) -> Result<u64, StoreError> {
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
