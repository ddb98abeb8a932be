//! reef-store integration tests: one binary, one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

/// Tests written once and run on both backends: `both! { async fn name(store) { … } }`
/// makes `name::sqlite` and `name::postgres`, each with a fresh, empty store.
macro_rules! both {
    ($($(#[$meta:meta])* async fn $name:ident($store:ident) $body:block)*) => {$(
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports, reason = "each test uses what it needs of its module")]
            use super::*;

            async fn body($store: &reef_store::Store) $body

            #[tokio::test]
            async fn sqlite() {
                let store = crate::Fresh::sqlite();
                body(&store).await;
            }

            #[tokio::test]
            async fn postgres() {
                let store = crate::Fresh::postgres().await;
                body(&store).await;
            }
        }
    )*};
    // Tests that reopen their store or reach under it take its `Place` instead.
    ($($(#[$meta:meta])* async fn $name:ident($place:ident: Place) $body:block)*) => {$(
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports, reason = "each test uses what it needs of its module")]
            use super::*;

            async fn body($place: &crate::Place) $body

            #[tokio::test]
            async fn sqlite() {
                body(&crate::Place::sqlite()).await;
            }

            #[tokio::test]
            async fn postgres() {
                body(&crate::Place::postgres().await).await;
            }
        }
    )*};
}

/// As `both!` for a store, and a third time (`name::pgvector`) on a PostgreSQL that has
/// pgvector, where vectors are kept and searched in the database: for vector search.
macro_rules! everywhere {
    ($($(#[$meta:meta])* async fn $name:ident($store:ident) $body:block)*) => {$(
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports, reason = "each test uses what it needs of its module")]
            use super::*;

            async fn body($store: &reef_store::Store) $body

            #[tokio::test]
            async fn sqlite() {
                let store = crate::Fresh::sqlite();
                body(&store).await;
            }

            #[tokio::test]
            async fn postgres() {
                let store = crate::Fresh::postgres().await;
                body(&store).await;
            }

            #[tokio::test]
            async fn pgvector() {
                let store = crate::Fresh::pgvector().await;
                body(&store).await;
            }
        }
    )*};
}

mod agents;
mod audit;
mod compactions;
mod copy;
mod fingerprints;
mod memory;
mod messages;
mod open;
mod pending;
mod pgvector;
mod postgres;
mod recall;
mod routines;
mod session_search;
mod sessions;
mod tokens;
mod usage;

use reef_core::SessionId;
use reef_store::{NewSession, Store};
use std::sync::atomic::{AtomicU32, Ordering};

/// An empty store on one backend, with what must outlive it.
pub struct Fresh {
    store: Store,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for Fresh {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}

impl Fresh {
    /// A SQLite file in a temporary directory.
    pub fn sqlite() -> Fresh {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("reef.db")).unwrap();
        Fresh { store, _dir: dir }
    }

    /// A database of its own on the PostgreSQL shared by this run's tests, with its keys in a
    /// temporary directory.
    pub async fn postgres() -> Fresh {
        Fresh::on(reef_test_support::Engines::shared()).await
    }

    /// As [`Fresh::postgres`], on the PostgreSQL with pgvector; the store uses it.
    pub async fn pgvector() -> Fresh {
        let fresh = Fresh::on(reef_test_support::Engines::shared_pgvector()).await;
        assert!(fresh.postgres().unwrap().pgvector().is_some());
        fresh
    }

    async fn on(engines: &reef_test_support::Engines) -> Fresh {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect_postgres(&fresh_database_on(engines).await, None, dir.path())
            .await
            .unwrap();
        Fresh { store, _dir: dir }
    }
}

/// Where a store lives on one backend, with its key files: a test can open it again, or
/// change its rows behind the store's back as someone with the database would.
pub enum Place {
    Sqlite { dir: tempfile::TempDir },
    Postgres { dir: tempfile::TempDir, url: String },
}

impl Place {
    /// A SQLite file in a temporary directory.
    pub fn sqlite() -> Place {
        Place::Sqlite {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A new database on the PostgreSQL shared by this run's tests.
    pub async fn postgres() -> Place {
        Place::Postgres {
            dir: tempfile::tempdir().unwrap(),
            url: fresh_database().await,
        }
    }

    /// A new database on the PostgreSQL with pgvector shared by this run's tests.
    pub async fn pgvector() -> Place {
        Place::Postgres {
            dir: tempfile::tempdir().unwrap(),
            url: fresh_database_on(reef_test_support::Engines::shared_pgvector()).await,
        }
    }

    /// A new, empty place on the same backend.
    pub async fn another(&self) -> Place {
        match self {
            Place::Sqlite { .. } => Place::sqlite(),
            Place::Postgres { .. } => Place::postgres().await,
        }
    }

    /// The directory holding the key files (and, on SQLite, the database).
    pub fn dir(&self) -> &std::path::Path {
        match self {
            Place::Sqlite { dir } | Place::Postgres { dir, .. } => dir.path(),
        }
    }

    /// Opens (or reopens) the store here.
    pub async fn open(&self) -> Result<Store, reef_store::StoreError> {
        match self {
            Place::Sqlite { dir } => Store::open(&dir.path().join("reef.db")),
            Place::Postgres { dir, url } => Store::connect_postgres(url, None, dir.path()).await,
        }
    }

    /// Opens the store here, which must succeed.
    pub async fn store(&self) -> Store {
        self.open().await.unwrap()
    }

    /// Runs one statement directly on the database, bypassing the store.
    pub async fn execute(&self, sql: &str) {
        match self {
            Place::Sqlite { dir } => {
                rusqlite::Connection::open(dir.path().join("reef.db"))
                    .unwrap()
                    .execute_batch(sql)
                    .unwrap();
            }
            Place::Postgres { url, .. } => {
                raw_postgres(url).await.batch_execute(sql).await.unwrap()
            }
        }
    }

    /// The first column of the first row a query returns, as text, read directly.
    pub async fn text(&self, sql: &str) -> String {
        match self {
            Place::Sqlite { dir } => rusqlite::Connection::open(dir.path().join("reef.db"))
                .unwrap()
                .query_row(sql, [], |r| r.get(0))
                .unwrap(),
            Place::Postgres { url, .. } => raw_postgres(url)
                .await
                .query_one(sql, &[])
                .await
                .unwrap()
                .get(0),
        }
    }
}

/// A plain client of a test database.
async fn raw_postgres(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// The URL of a new, empty database on the PostgreSQL shared by this run's tests.
pub async fn fresh_database() -> String {
    fresh_database_on(reef_test_support::Engines::shared()).await
}

/// The URL of a new, empty database on `engines`' PostgreSQL.
pub async fn fresh_database_on(engines: &reef_test_support::Engines) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "t{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    raw_postgres(engines.database_url())
        .await
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let base = engines.database_url();
    format!("{}/{name}", &base[..base.rfind('/').unwrap()])
}

/// A new-session request with a fixed id.
pub fn new_session(id: &str) -> NewSession {
    NewSession {
        id: SessionId::from(id),
        agent: Some("main".into()),
        workspace: "/tmp/ws".into(),
        provider: "openai".into(),
        model: "gpt-test".into(),
    }
}

/// An in-memory store holding one session with the given id.
pub async fn store_with(id: &str) -> (Store, SessionId) {
    let store = Store::open_in_memory().unwrap();
    let id = session_in(&store, id).await;
    (store, id)
}

/// Creates a session with the given id in `store`.
pub async fn session_in(store: &Store, id: &str) -> SessionId {
    store.create_session(new_session(id)).await.unwrap().id
}
