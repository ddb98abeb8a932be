//! The PostgreSQL store against a real PostgreSQL (`scripts/engines`): its schema holds every
//! table and column of the SQLite one, nodes starting together migrate it once, a database a
//! newer reef migrated is refused, a database
//! that cannot be reached, or a URL that is not one, is named in the error, and cluster nodes
//! share agents through leases that move when a node dies or leaves.

use reef_store::{NodeStatus, PgError, PgStore, Store};
use reef_test_support::Engines;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Tables of cluster mode alone.
const CLUSTER_TABLES: &[&str] = &["agent_leases", "cluster_nodes"];

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

/// A plain connection to `url`, for looking at what the store wrote.
async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// The (table, column) pairs of the public schema at `url`, without the migrations' own table
/// and cluster mode's.
async fn postgres_columns(url: &str) -> BTreeSet<(String, String)> {
    connect(url)
        .await
        .query(
            "SELECT table_name::text, column_name::text FROM information_schema.columns
             WHERE table_schema = 'public' AND table_name <> 'reef_schema'",
            &[],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.get(0), row.get(1)))
        .filter(|(table, _): &(String, String)| !CLUSTER_TABLES.contains(&table.as_str()))
        .collect()
}

#[tokio::test]
async fn the_postgres_schema_has_every_table_and_column_of_the_sqlite_one() {
    let engines = Engines::start();
    let store = PgStore::connect(engines.database_url(), None)
        .await
        .unwrap();
    assert_eq!(store.schema_version().await.unwrap(), 6);
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
        PgStore::connect(url, None),
        PgStore::connect(url, None),
        PgStore::connect(url, None)
    );
    for store in [a, b, c] {
        assert_eq!(store.unwrap().schema_version().await.unwrap(), 6);
    }
    // A node started later finds the schema as it is.
    let again = PgStore::connect(url, None).await.unwrap();
    assert_eq!(again.schema_version().await.unwrap(), 6);
    let applied: i64 = connect(url)
        .await
        .query_one("SELECT count(*) FROM reef_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(applied, 6);
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_reef_is_refused() {
    let url = crate::fresh_database().await;
    drop(PgStore::connect(&url, None).await.unwrap());
    connect(&url)
        .await
        .batch_execute("INSERT INTO reef_schema (version, applied_at) VALUES (99, 'later')")
        .await
        .unwrap();
    let err = PgStore::connect(&url, None).await.err().unwrap();
    assert!(matches!(err, PgError::Newer { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("version 99"), "{err}");
}

#[tokio::test]
async fn an_unreachable_database_and_a_bad_url_are_named() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = PgStore::connect(&format!("postgres://reef@127.0.0.1:{port}/reef"), None)
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
        let err = PgStore::connect(url, None).await.unwrap_err();
        assert!(matches!(err, PgError::Url(_)), "{url}: {err:?}");
        let message = err.to_string();
        assert!(
            message.starts_with("database_url: ") && message.contains(why),
            "{url}: {message}"
        );
    }
}

/// Adds agents named `prefix-0`… in `state` (straight into the table: the PostgreSQL store
/// does not create agents yet); returns their ids.
async fn add_agents(url: &str, prefix: &str, count: usize, state: &str) -> Vec<String> {
    let client = connect(url).await;
    let mut ids = Vec::new();
    for i in 0..count {
        let id = format!("agt_{prefix}{i:02}");
        client
            .execute(
                "INSERT INTO agents (id, name, template, persona, workspace, capabilities,
                                     budget, state, created_at, updated_at)
                 VALUES ($1, $2, 'default', '', '/tmp', '{}', '{}', $3,
                         '2026-11-29T00:00:00.000Z', '2026-11-29T00:00:00.000Z')",
                &[&id, &format!("{prefix}-{i}"), &state],
            )
            .await
            .unwrap();
        ids.push(id);
    }
    ids
}

const LONG: Duration = Duration::from_secs(600);

#[tokio::test]
async fn a_node_name_belongs_to_one_live_node_at_a_time() {
    let engines = Engines::start();
    let store = PgStore::connect(engines.database_url(), None)
        .await
        .unwrap();
    let first = store.join_cluster("alpha", LONG, None).await.unwrap();
    let err = store.join_cluster("alpha", LONG, None).await.unwrap_err();
    assert!(matches!(err, PgError::NameTaken { .. }), "{err:?}");
    assert!(err.to_string().contains("alpha"), "{err}");
    assert!(store.heartbeat(&first, true, 0).await.unwrap().is_empty());
    // A node whose lease has run out (a zero lease runs out at once) gives its name up.
    let lapsed = store
        .join_cluster("beta", Duration::ZERO, None)
        .await
        .unwrap();
    let successor = store.join_cluster("beta", LONG, None).await.unwrap();
    let err = store.heartbeat(&lapsed, true, 0).await.unwrap_err();
    assert!(matches!(err, PgError::Superseded { .. }), "{err:?}");
    assert!(store.claim_agents(&lapsed).await.is_err());
    assert!(store.heartbeat(&successor, true, 0).await.is_ok());
}

#[tokio::test]
async fn agents_are_shared_among_nodes_and_move_when_a_node_dies_or_leaves() {
    let engines = Engines::start();
    let url = engines.database_url();
    let store = PgStore::connect(url, None).await.unwrap();
    let agents = add_agents(url, "worker", 10, "running").await;
    add_agents(url, "done", 2, "completed").await;

    // A node with a zero lease is dead as soon as it has claimed: alone, it takes every agent.
    let dead = store
        .join_cluster("dead", Duration::ZERO, None)
        .await
        .unwrap();
    let taken = store.claim_agents(&dead).await.unwrap();
    assert_eq!(taken.len(), 10);
    assert!(taken.iter().all(|l| l.epoch == 1));

    // Three live nodes claim at once: each takes at most its share (10 over 3, rounded up),
    // none takes an agent another took, and the dead node's agents all move, a new epoch each.
    let a = store.join_cluster("a", LONG, None).await.unwrap();
    let b = store.join_cluster("b", LONG, None).await.unwrap();
    let c = store.join_cluster("c", LONG, Some(3)).await.unwrap();
    let (ta, tb, tc) = tokio::join!(
        store.claim_agents(&a),
        store.claim_agents(&b),
        store.claim_agents(&c)
    );
    let (ta, tb, tc) = (ta.unwrap(), tb.unwrap(), tc.unwrap());
    assert!(
        ta.len() <= 4 && tb.len() <= 4 && tc.len() <= 3,
        "{ta:?} {tb:?} {tc:?}"
    );
    // Whoever claimed first left some for the others; a second round takes the rest.
    let rest = [
        store.claim_agents(&a).await.unwrap(),
        store.claim_agents(&b).await.unwrap(),
        store.claim_agents(&c).await.unwrap(),
    ];
    let leases = store.agent_leases().await.unwrap();
    let owners: BTreeMap<String, String> = leases
        .iter()
        .map(|l| (l.agent.as_str().to_owned(), l.node.clone()))
        .collect();
    assert_eq!(
        owners.keys().cloned().collect::<Vec<_>>(),
        agents,
        "{leases:?} {rest:?}"
    );
    assert!(
        leases.iter().all(|l| l.epoch == 2 && !l.expired),
        "{leases:?}"
    );
    let count = |node: &str| owners.values().filter(|n| *n == node).count();
    assert_eq!(
        (count("dead"), count("a") + count("b") + count("c")),
        (0, 10)
    );
    assert!(
        count("a") <= 4 && count("b") <= 4 && count("c") <= 3,
        "{owners:?}"
    );

    // A heartbeat renews what a node holds and says what that is.
    // `b` has lost NATS: status says it polls.
    let held = store.heartbeat(&b, false, 0).await.unwrap();
    assert_eq!(held.len(), count("b"));

    // `a` leaves gracefully: its agents are free at once, and `b` and `c` take them.
    let released = store.release_agents(&a).await.unwrap();
    assert_eq!(released as usize, count("a"));
    assert!(
        store.claim_agents(&a).await.unwrap().is_empty(),
        "a draining node claims nothing"
    );
    store.claim_agents(&b).await.unwrap();
    store.claim_agents(&c).await.unwrap();
    let nodes = store.cluster_nodes().await.unwrap();
    let status = |name: &str, alive: bool, draining: bool, agents: i64| NodeStatus {
        name: name.into(),
        alive,
        draining,
        agents,
        bus_connected: name != "b",
        bus_lag: 0,
    };
    // `c` is capped at 3, so `b` takes the other 7.
    assert_eq!(
        nodes,
        [
            status("a", true, true, 0),
            status("b", true, false, 7),
            status("c", true, false, 3),
            status("dead", false, false, 0),
        ]
    );
}
