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
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect_postgres(&fresh_database().await, None, dir.path())
            .await
            .unwrap();
        Fresh { store, _dir: dir }
    }
}

/// The URL of a new, empty database on the PostgreSQL shared by this run's tests.
pub async fn fresh_database() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let engines = reef_test_support::Engines::shared();
    let name = format!(
        "t{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let (client, connection) =
        tokio_postgres::connect(engines.database_url(), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    client
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
