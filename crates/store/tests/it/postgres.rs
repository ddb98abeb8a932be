//! The PostgreSQL store against a real PostgreSQL (`scripts/engines`): its schema holds every
//! table and column of the SQLite one, nodes starting together migrate it once, and a database
//! that cannot be reached, or a URL that is not one, is named in the error.

use reef_store::{PgError, PgStore, Store};
use reef_test_support::Engines;
use std::collections::BTreeSet;

/// Columns PostgreSQL has and SQLite keeps elsewhere: the keyword index of each searchable
/// table (SQLite's FTS5 tables `memory_fts` and `messages_fts`).
const POSTGRES_ONLY: &[(&str, &str)] = &[("memory_chunks", "search"), ("messages", "search")];

/// The (table, column) pairs of a freshly migrated SQLite store, without SQLite's own tables
/// and its FTS5 tables (PostgreSQL indexes a column of the table instead).
fn sqlite_columns() -> BTreeSet<(String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reef.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type = 'table'
             AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%fts%'",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut columns = BTreeSet::new();
    for table in tables {
        let names: Vec<String> = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        columns.extend(names.into_iter().map(|c| (table.clone(), c)));
    }
    columns
}

/// The (table, column) pairs of the public schema at `url`, without the migrations' own table.
async fn postgres_columns(url: &str) -> BTreeSet<(String, String)> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .query(
            "SELECT table_name::text, column_name::text FROM information_schema.columns
             WHERE table_schema = 'public' AND table_name <> 'reef_schema'",
            &[],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[tokio::test]
async fn the_postgres_schema_has_every_table_and_column_of_the_sqlite_one() {
    let engines = Engines::start();
    let store = PgStore::connect(engines.database_url()).await.unwrap();
    assert_eq!(store.schema_version().await.unwrap(), 1);
    let sqlite = sqlite_columns();
    assert!(sqlite.len() > 150, "{} columns", sqlite.len());
    let mut postgres = postgres_columns(engines.database_url()).await;
    for (table, column) in POSTGRES_ONLY {
        assert!(
            postgres.remove(&((*table).to_owned(), (*column).to_owned())),
            "{table}.{column} is missing"
        );
    }
    let only_sqlite: Vec<_> = sqlite.difference(&postgres).collect();
    let only_postgres: Vec<_> = postgres.difference(&sqlite).collect();
    assert!(
        only_sqlite.is_empty() && only_postgres.is_empty(),
        "only in SQLite: {only_sqlite:?}\nonly in PostgreSQL: {only_postgres:?}"
    );
}

#[tokio::test]
async fn nodes_starting_together_migrate_once() {
    let engines = Engines::start();
    let url = engines.database_url();
    let (a, b, c) = tokio::join!(
        PgStore::connect(url),
        PgStore::connect(url),
        PgStore::connect(url)
    );
    for store in [a, b, c] {
        assert_eq!(store.unwrap().schema_version().await.unwrap(), 1);
    }
    // A node started later finds the schema as it is.
    let again = PgStore::connect(url).await.unwrap();
    assert_eq!(again.schema_version().await.unwrap(), 1);
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let applied: i64 = client
        .query_one("SELECT count(*) FROM reef_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(applied, 1);
}

#[tokio::test]
async fn an_unreachable_database_and_a_bad_url_are_named() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = PgStore::connect(&format!("postgres://reef@127.0.0.1:{port}/reef"))
        .await
        .unwrap_err();
    assert!(matches!(err, PgError::Connect { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains(&format!("127.0.0.1:{port}/reef")) && message.contains("PostgreSQL"),
        "{message}"
    );
    for (url, why) in [
        ("mysql://reef@localhost/reef", "not a PostgreSQL URL"),
        ("postgres://reef@127.0.0.1:5432", "names no database"),
    ] {
        let err = PgStore::connect(url).await.unwrap_err();
        assert!(matches!(err, PgError::Url(_)), "{url}: {err:?}");
        let message = err.to_string();
        assert!(
            message.starts_with("database_url: ") && message.contains(why),
            "{url}: {message}"
        );
    }
}
