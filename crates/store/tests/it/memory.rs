//! Long-term memory: namespaces keep agents apart, keyword search ranks with BM25 and filters
//! by tag and time, documents are chunked, forgetting removes an item and its index entries.

use reef_store::{Chunking, MemoryQuery, NewMemory, StoreError};

fn memory(namespace: &str, text: &str, tags: &[&str]) -> NewMemory {
    NewMemory {
        namespace: namespace.into(),
        text: text.into(),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        source: Some("test".into()),
    }
}

fn query(namespaces: &[&str], text: &str) -> MemoryQuery {
    MemoryQuery {
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
        text: text.into(),
        limit: 10,
        ..MemoryQuery::default()
    }
}

both! {
    async fn one_agent_cannot_read_another_agents_private_memory(store) {
        let c = Chunking::default();
        store
            .add_memory(
                memory(
                    "agent:alice",
                    "The deploy password rotates on Fridays.",
                    &[],
                ),
                c,
            )
            .await
            .unwrap();
        store
            .add_memory(
                memory("shared", "Deploys happen from the main branch.", &[]),
                c,
            )
            .await
            .unwrap();

        let bob = store
            .search_memory(query(&["agent:bob", "shared"], "deploy"))
            .await
            .unwrap();
        assert_eq!(bob.len(), 1, "{bob:?}");
        assert_eq!(bob[0].namespace, "shared");
        let alice = store
            .search_memory(query(&["agent:alice", "shared"], "deploy"))
            .await
            .unwrap();
        assert_eq!(alice.len(), 2, "{alice:?}");
        assert!(
            store
                .list_memory(vec!["agent:bob".into()], 10)
                .await
                .unwrap()
                .is_empty()
        );
    }
}

both! {
    async fn the_exact_keyword_ranks_first_and_filters_apply(store) {
        let c = Chunking::default();
        store
            .add_memory(
                memory(
                    "shared",
                    "We chose PostgreSQL for the cluster store after the benchmark.",
                    &["decision"],
                ),
                c,
            )
            .await
            .unwrap();
        store
            .add_memory(
                memory(
                    "shared",
                    "The cluster runs three nodes; the store is replicated.",
                    &["ops"],
                ),
                c,
            )
            .await
            .unwrap();
        store
            .add_memory(memory("shared", "Lunch is at noon.", &[]), c)
            .await
            .unwrap();

        let hits = store
            .search_memory(query(&["shared"], "postgresql cluster"))
            .await
            .unwrap();
        assert_eq!(hits.len(), 2, "{hits:?}");
        assert!(hits[0].text.contains("PostgreSQL"), "{hits:?}");
        assert!(hits[0].score > hits[1].score);
        assert_eq!(hits[0].tags, ["decision"]);

        let tagged = MemoryQuery {
            tags: vec!["ops".into()],
            ..query(&["shared"], "cluster")
        };
        let hits = store.search_memory(tagged).await.unwrap();
        assert_eq!(hits.len(), 1);
        assert!(hits[0].text.contains("three nodes"));

        let future = MemoryQuery {
            since: Some("9999-01-01T00:00:00.000000Z".into()),
            ..query(&["shared"], "cluster")
        };
        assert!(store.search_memory(future).await.unwrap().is_empty());
        // Search operators in the text are words, not syntax.
        let hits = store
            .search_memory(query(&["shared"], "lunch AND (NOT \"noon"))
            .await
            .unwrap();
        assert_eq!(hits.len(), 1);
    }
}

both! {
    async fn documents_are_chunked_and_the_matching_chunk_is_returned(store) {
        let mut text = "Filler sentence about nothing in particular. ".repeat(40);
        text.push_str("The backup key is kept in the blue vault. ");
        text.push_str(&"More filler text to pad the document out. ".repeat(40));
        let item = store
            .add_memory(
                memory("agent:alice", &text, &["notes"]),
                Chunking {
                    size: 200,
                    overlap: 40,
                },
            )
            .await
            .unwrap();
        assert!(item.chunks > 10, "{}", item.chunks);
        let hits = store
            .search_memory(query(&["agent:alice"], "vault"))
            .await
            .unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert!(hits[0].text.contains("blue vault") && hits[0].text.chars().count() <= 200);
        assert_eq!(hits[0].item_id, item.id);
    }
}

both! {
    async fn forgetting_removes_the_item_only_in_its_own_namespace(store) {
        let item = store
            .add_memory(
                memory("agent:alice", "Alice likes green tea.", &[]),
                Chunking::default(),
            )
            .await
            .unwrap();
        assert!(
            !store
                .forget_memory(vec!["agent:bob".into(), "shared".into()], item.id)
                .await
                .unwrap()
        );
        assert_eq!(
            store
                .search_memory(query(&["agent:alice"], "tea"))
                .await
                .unwrap()
                .len(),
            1
        );
        assert!(
            store
                .forget_memory(vec!["agent:alice".into()], item.id)
                .await
                .unwrap()
        );
        assert!(
            store
                .search_memory(query(&["agent:alice"], "tea"))
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .list_memory(vec!["agent:alice".into()], 10)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            !store
                .forget_memory(vec!["agent:alice".into()], item.id)
                .await
                .unwrap()
        );
    }
}

both! {
    async fn bad_input_names_the_field(store) {
        let c = Chunking::default();
        let field = |e: StoreError| match e {
            StoreError::Invalid { field, .. } => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(
                store
                    .add_memory(memory("alice", "x", &[]), c)
                    .await
                    .unwrap_err()
            ),
            "namespace"
        );
        assert_eq!(
            field(
                store
                    .add_memory(memory("shared", "  ", &[]), c)
                    .await
                    .unwrap_err()
            ),
            "text"
        );
        let bad = Chunking {
            size: 100,
            overlap: 100,
        };
        assert_eq!(
            field(
                store
                    .add_memory(memory("shared", "x", &[]), bad)
                    .await
                    .unwrap_err()
            ),
            "chunking"
        );
        assert_eq!(
            field(
                store
                    .search_memory(query(&["shared"], "?!"))
                    .await
                    .unwrap_err()
            ),
            "query"
        );
        assert_eq!(
            field(store.search_memory(query(&[], "x")).await.unwrap_err()),
            "namespaces"
        );
    }
}

both! {
    async fn a_match_ranked_below_many_filtered_out_ones_is_still_found(store) {
        let c = Chunking::default();
        for i in 0..150 {
            store
                .add_memory(memory("agent:bob", &format!("alpha note {i}"), &[]), c)
                .await
                .unwrap();
        }
        // Long, so BM25 ranks it below every short match of bob's.
        let long = format!("alpha {}", "filler words here ".repeat(30));
        store
            .add_memory(memory("agent:alice", &long, &[]), c)
            .await
            .unwrap();
        let mut q = query(&["agent:alice"], "alpha");
        q.limit = 1;
        let hits = store.search_memory(q).await.unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].namespace, "agent:alice");
        let mut bob = query(&["agent:bob"], "alpha");
        bob.limit = 200;
        assert_eq!(store.search_memory(bob).await.unwrap().len(), 150);
    }
}

both! {
async fn document_counts_follow_new_and_forgotten_chunks_from_any_handle(place: Place) {
    let store = place.store().await;
    let c = Chunking::default();
    let words = || vec!["kafka".to_owned(), "broker".to_owned()];
    let first = store
        .add_memory(memory("shared", "Kafka broker 3 restarted.", &[]), c)
        .await
        .unwrap();
    assert_eq!(
        store.document_counts(words()).await.unwrap(),
        (1, vec![1, 1])
    );
    // Asked again, the counts are the same (now remembered).
    assert_eq!(
        store.document_counts(words()).await.unwrap(),
        (1, vec![1, 1])
    );
    // Another handle on the same file (another process, say) adds a chunk.
    let other = place.store().await;
    other
        .add_memory(memory("shared", "The kafka topic was compacted.", &[]), c)
        .await
        .unwrap();
    assert_eq!(
        store.document_counts(words()).await.unwrap(),
        (2, vec![2, 1])
    );
    // Forgetting leaves the highest id as it was, and the counts still drop.
    assert!(
        store
            .forget_memory(vec!["shared".into()], first.id)
            .await
            .unwrap()
    );
    assert_eq!(
        store.document_counts(words()).await.unwrap(),
        (2, vec![1, 0])
    );
}
}
