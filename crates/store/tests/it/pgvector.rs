//! pgvector: detected when the server has it (and not otherwise), vectors kept in the
//! database and searched there with the same ranking and scores as the scan in RAM, nothing
//! loaded into RAM, and vectors written without pgvector's column (by `reef migrate`, or a
//! node that ran before the extension) given it.

use crate::{Fresh, Place};
use reef_store::{Chunking, NewMemory, Store, StoreError, VectorLoads, VectorQuery};

const DIMS: usize = 8;

/// A unit vector mostly along `d`, a little along the next two dimensions.
fn unit(d: usize, tilt: f32) -> Vec<f32> {
    let mut v = vec![0.0; DIMS];
    v[d % DIMS] = 1.0;
    v[(d + 1) % DIMS] = tilt;
    v[(d + 2) % DIMS] = tilt / 2.0;
    reef_core::normalize(&mut v);
    v
}

/// Twelve items in two namespaces, each with a vector, the odd ones tagged `odd`.
async fn seed(store: &Store) {
    for i in 0..12 {
        let item = store
            .add_memory(
                NewMemory {
                    namespace: if i % 3 == 0 { "agent:other" } else { "shared" }.into(),
                    text: format!("note {i}"),
                    tags: if i % 2 == 1 {
                        vec!["odd".into()]
                    } else {
                        Vec::new()
                    },
                    source: None,
                },
                Chunking::default(),
            )
            .await
            .unwrap();
        store
            .store_vectors("e", vec![(item.id, unit(i % 5, 0.1 * i as f32))])
            .await
            .unwrap();
    }
}

/// (text, score) of a search for `vector` in `shared`, optionally only tagged `odd`.
async fn search(store: &Store, vector: Vec<f32>, odd: bool) -> Vec<(String, f64)> {
    store
        .vector_search(VectorQuery {
            namespaces: vec!["shared".into()],
            embedder: "e".into(),
            vector,
            tags: if odd { vec!["odd".into()] } else { Vec::new() },
            limit: 4,
            ..VectorQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.text, h.score))
        .collect()
}

/// Same texts in the same order, scores equal to float precision.
fn assert_same(ram: &[(String, f64)], db: &[(String, f64)]) {
    assert_eq!(
        ram.iter().map(|h| &h.0).collect::<Vec<_>>(),
        db.iter().map(|h| &h.0).collect::<Vec<_>>(),
        "in RAM: {ram:?}\nin the database: {db:?}"
    );
    for (a, b) in ram.iter().zip(db) {
        assert!((a.1 - b.1).abs() < 1e-5, "{ram:?} / {db:?}");
    }
}

#[tokio::test]
async fn a_search_in_the_database_ranks_and_scores_as_the_scan_in_ram() {
    let plain = Fresh::postgres().await;
    assert_eq!(
        plain.postgres().unwrap().pgvector(),
        None,
        "no pgvector here"
    );
    let ram = Fresh::sqlite();
    let db = Fresh::pgvector().await;
    seed(&ram).await;
    seed(&db).await;
    for (d, odd) in [(0, false), (1, false), (3, true), (4, false), (2, true)] {
        let query = unit(d, 0.3);
        assert_same(
            &search(&ram, query.clone(), odd).await,
            &search(&db, query, odd).await,
        );
    }
    assert!(search(&db, unit(0, 0.0), false).await.len() == 4);
    assert_eq!(ram.vector_loads().full, 1);
    assert_eq!(db.vector_loads(), VectorLoads::default(), "nothing in RAM");

    // Another length than the stored vectors' is named on writing and on searching.
    let item = db
        .add_memory(
            NewMemory {
                namespace: "shared".into(),
                text: "longer".into(),
                ..NewMemory::default()
            },
            Chunking::default(),
        )
        .await
        .unwrap();
    let err = db
        .store_vectors("e", vec![(item.id, vec![0.5; DIMS + 1])])
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                field: "vectors",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("stored earlier have 8"), "{err}");
}

#[tokio::test]
async fn a_copy_into_a_database_with_pgvector_is_searchable_at_once() {
    let source = Fresh::sqlite();
    seed(&source).await;
    let target = Fresh::pgvector().await;
    source.copy_to_postgres(&target).await.unwrap();
    let query = unit(1, 0.2);
    assert_same(
        &search(&source, query.clone(), false).await,
        &search(&target, query, false).await,
    );
}

#[tokio::test]
async fn vectors_stored_without_the_column_are_given_it_when_a_node_starts() {
    let place = Place::pgvector().await;
    let first = place.store().await;
    seed(&first).await;
    let before = search(&first, unit(2, 0.1), false).await;
    // As a node that ran before the extension was installed leaves them.
    place
        .execute("UPDATE memory_chunks SET embedding_vec = NULL")
        .await;
    assert!(search(&first, unit(2, 0.1), false).await.is_empty());
    let second = place.store().await;
    assert_eq!(
        place
            .text("SELECT CAST(count(*) AS TEXT) FROM memory_chunks WHERE embedding_vec IS NULL")
            .await,
        "0"
    );
    assert_same(&before, &search(&second, unit(2, 0.1), false).await);
}
