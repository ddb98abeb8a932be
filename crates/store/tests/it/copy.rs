//! Copying a SQLite store into PostgreSQL (`reef migrate --to postgres`): every table's rows
//! arrive, the audit chain still verifies under the same key, reads on PostgreSQL give what
//! they gave on SQLite, new rows get new ids, and a database that holds data is refused.

use reef_core::{AgentState, Message};
use reef_store::{Chunking, NewMemory, Store, StoreError};

/// A SQLite store with a bit of everything, in `dir` (its keys beside it).
async fn populated(dir: &std::path::Path) -> Store {
    let store = Store::open(&dir.join("reef.db")).unwrap();
    let session = crate::session_in(&store, "ses_copy").await;
    for m in [
        Message::user("hello"),
        Message::Tool {
            call_id: reef_core::ToolCallId::from_string("call_1".to_owned()),
            name: "shell".into(),
            content: "out".into(),
            is_error: true,
        },
    ] {
        store.append_message(&session, &m).await.unwrap();
    }
    let agent = store
        .create_agent(crate::agents::new_agent("copied"))
        .await
        .unwrap();
    store
        .transition_agent(&agent.id, AgentState::Running, "started")
        .await
        .unwrap();
    store
        .deliver(&agent.id, "operator", "hi", "k1")
        .await
        .unwrap();
    store
        .append_audit("config.loaded", None, serde_json::json!({"files": 1}))
        .await
        .unwrap();
    store
        .add_memory(
            NewMemory {
                namespace: "shared".into(),
                text: "Deploys happen from the main branch.".into(),
                tags: vec!["ops".into()],
                source: None,
            },
            Chunking::default(),
        )
        .await
        .unwrap();
    store
}

#[tokio::test]
async fn a_sqlite_store_copied_into_postgres_reads_the_same_and_its_audit_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = populated(dir.path()).await;
    // The same keys: the audit chain was made with them.
    let pg = Store::connect_postgres(&crate::fresh_database().await, None, dir.path())
        .await
        .unwrap();
    let copied = sqlite.copy_to_postgres(&pg).await.unwrap();
    let rows = |table: &str| copied.iter().find(|c| c.table == table).unwrap().rows;
    assert_eq!(rows("agents"), 1);
    assert_eq!(rows("messages"), 2);
    assert_eq!(rows("inbox"), 1);
    assert_eq!(rows("rooms"), 2);
    assert!(rows("events") >= 3 && rows("audit") >= 2, "{copied:?}");

    assert_eq!(
        pg.list_agents().await.unwrap(),
        sqlite.list_agents().await.unwrap()
    );
    assert_eq!(
        pg.events_after(0, None, 1000).await.unwrap(),
        sqlite.events_after(0, None, 1000).await.unwrap()
    );
    let session = reef_core::SessionId::from("ses_copy");
    assert_eq!(
        pg.messages(&session).await.unwrap(),
        sqlite.messages(&session).await.unwrap()
    );
    assert_eq!(
        pg.list_memory(vec!["shared".into()], 10).await.unwrap(),
        sqlite.list_memory(vec!["shared".into()], 10).await.unwrap()
    );
    let verdict = pg.verify_audit().await.unwrap();
    assert_eq!(verdict.broken, None, "{verdict:?}");
    assert_eq!(verdict.checked, rows("audit"));

    // New rows continue the sequences rather than collide with the copied ones.
    let last = sqlite.last_event_seq().await.unwrap();
    let next = pg
        .append_event("test.after", None, serde_json::json!({}))
        .await
        .unwrap();
    assert_eq!(next.seq, last + 1);

    // A second copy into the same database is refused, and changes nothing.
    let err = sqlite.copy_to_postgres(&pg).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert!(err.to_string().contains("already holds reef data"), "{err}");
    assert_eq!(pg.list_agents().await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_copy_covers_every_table_of_the_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reef.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table'
             AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%fts%'",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables.sort();
    let sqlite = Store::open(&path).unwrap();
    let pg = Store::connect_postgres(&crate::fresh_database().await, None, dir.path())
        .await
        .unwrap();
    let mut copied: Vec<String> = sqlite
        .copy_to_postgres(&pg)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.table.to_owned())
        .collect();
    copied.sort();
    assert_eq!(copied, tables);
}
