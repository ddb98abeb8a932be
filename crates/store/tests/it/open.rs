//! Opening: migrations, WAL, durability across drop/reopen (on both backends), and bad files.

use crate::new_session;
use reef_core::{Message, SessionId};
use reef_store::{Store, StoreError};

#[tokio::test]
async fn migrations_apply_on_open_and_are_idempotent_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/reef.db");
    let store = Store::open(&path).unwrap();
    assert_eq!(store.path(), Some(path.as_path()));
    assert_eq!(store.schema_version().unwrap(), 16);
    store.create_session(new_session("ses_a")).await.unwrap();
    drop(store);

    let again = Store::open(&path).unwrap();
    assert_eq!(again.schema_version().unwrap(), 16);
    assert!(
        again
            .get_session(&SessionId::from("ses_a"))
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn in_memory_store_is_migrated() {
    let store = Store::open_in_memory().unwrap();
    assert_eq!(store.path(), None);
    assert_eq!(store.schema_version().unwrap(), 16);
    assert!(store.list_sessions(10).await.unwrap().is_empty());
}

#[test]
fn file_store_uses_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reef.db");
    let _store = Store::open(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

both! {
async fn messages_survive_drop_without_close(place: Place) {
    let id = SessionId::from("ses_durable");
    {
        let store = place.store().await;
        store
            .create_session(new_session(id.as_str()))
            .await
            .unwrap();
        for i in 0..5 {
            store
                .append_message(&id, &Message::user(format!("m{i}")))
                .await
                .unwrap();
        }
        // Dropped here with no explicit close or checkpoint.
    }
    let store = place.store().await;
    let msgs = store.messages(&id).await.unwrap();
    let texts: Vec<_> = msgs
        .iter()
        .map(|m| m.message.content().to_owned())
        .collect();
    assert_eq!(texts, ["m0", "m1", "m2", "m3", "m4"]);
    assert_eq!(
        msgs.iter().map(|m| m.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
}
}

#[test]
fn non_sqlite_file_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-a-db.db");
    std::fs::write(
        &path,
        "this is plainly not a SQLite database, just some text ".repeat(50),
    )
    .unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(
            &err,
            // The first PRAGMA reads the file header, so this fails before migrating.
            StoreError::Open { path: p, .. } if p == &path
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    // The file is left untouched for the user to inspect.
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .starts_with("this is plainly")
    );
}

#[test]
fn newer_schema_is_a_migration_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reef.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Migration { .. }), "{err:?}");
}

#[tokio::test]
async fn query_errors_name_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("named.db");
    let store = Store::open(&path).unwrap();
    store.create_session(new_session("ses_dup")).await.unwrap();
    let err = store
        .create_session(new_session("ses_dup"))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("named.db"), "{text}");
    assert!(text.contains("UNIQUE"), "{text}");
}
