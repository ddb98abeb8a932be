//! Memory with vectors: a deterministic concept embedder (synonyms share a dimension) stands
//! in for a model, so paraphrases are "close" without one. Covers vector search, namespacing
//! and forgetting of vectors, reciprocal-rank fusion, and the keyword-only fallback.

use async_trait::async_trait;
use reef_core::{Embedder, ModelError};
use reef_store::{
    Chunking, Fusion, FusionMethod, Memory, MemoryHit, NewMemory, QueryTerms, Scan, SearchMode,
    SearchRequest, Store, StoreError, VectorLoads, VectorQuery, fuse,
};
use std::sync::Arc;

/// Words of one concept map to the same dimension; anything else to a hashed "other" one.
struct ConceptEmbedder;

const CONCEPTS: &[&[&str]] = &[
    &["car", "automobile", "vehicle", "sedan"],
    &["meeting", "sync", "standup", "call"],
    &["database", "postgres", "db", "sql"],
    &["cheap", "inexpensive", "budget", "affordable"],
    &["holiday", "vacation", "trip", "leave"],
];
const DIMS: usize = 16;

#[async_trait]
impl Embedder for ConceptEmbedder {
    fn id(&self) -> &str {
        "concepts"
    }

    fn dimensions(&self) -> usize {
        DIMS
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; DIMS];
                for word in t.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                    if word.is_empty() {
                        continue;
                    }
                    match CONCEPTS.iter().position(|c| c.contains(&word)) {
                        Some(i) => v[i] += 1.0,
                        None => v[CONCEPTS.len() + word.len() % (DIMS - CONCEPTS.len())] += 0.1,
                    }
                }
                reef_core::normalize(&mut v);
                v
            })
            .collect())
    }
}

fn memory_with(store: Store, embedder: bool) -> Memory {
    let embedder: Result<Arc<dyn Embedder>, String> = if embedder {
        Ok(Arc::new(ConceptEmbedder))
    } else {
        Err("no embedding model is installed (run `reef models pull minilm`)".into())
    };
    Memory::new(store, embedder, Chunking::default(), Fusion::default())
}

fn item(namespace: &str, text: &str) -> NewMemory {
    NewMemory {
        namespace: namespace.into(),
        text: text.into(),
        ..NewMemory::default()
    }
}

fn request(namespaces: &[&str], text: &str, mode: SearchMode) -> SearchRequest {
    SearchRequest {
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
        text: text.into(),
        limit: 3,
        mode,
        ..SearchRequest::default()
    }
}

async fn seeded(store: &Store, embedder: bool) -> Memory {
    let memory = memory_with(store.clone(), embedder);
    for text in [
        "We bought a used sedan for the team in March.",
        "Ticket ZX-81: the weekly sync moved to Thursday at 10.",
        "Postgres runs on the host db-eu-3 with 64 GB of RAM.",
        "Look for inexpensive hotels near the venue.",
        "Priya is on vacation until the 14th.",
    ] {
        let saved = memory.save(item("agent:alice", text)).await.unwrap();
        assert_eq!(saved.note.is_none(), embedder, "{:?}", saved.note);
    }
    memory
}

fn texts(hits: &[MemoryHit]) -> Vec<&str> {
    hits.iter().map(|h| h.text.as_str()).collect()
}

everywhere! {
    async fn hybrid_surfaces_both_the_exact_keyword_hit_and_the_paraphrase(store) {
        let memory = seeded(store, true).await;
        // "ZX-81" only matches by keyword; "automobile" only by meaning.
        let out = memory
            .search(request(
                &["agent:alice"],
                "ZX-81 automobile",
                SearchMode::Hybrid,
            ))
            .await
            .unwrap();
        assert_eq!(out.mode, SearchMode::Hybrid);
        assert_eq!(out.note, None);
        let found = texts(&out.hits);
        assert!(found.iter().any(|t| t.contains("ZX-81")), "{found:?}");
        assert!(found.iter().any(|t| t.contains("sedan")), "{found:?}");

        let keyword = memory
            .search(request(
                &["agent:alice"],
                "ZX-81 automobile",
                SearchMode::Keyword,
            ))
            .await
            .unwrap();
        assert!(!texts(&keyword.hits).iter().any(|t| t.contains("sedan")));
        let vector = memory
            .search(request(&["agent:alice"], "automobile", SearchMode::Vector))
            .await
            .unwrap();
        assert!(
            vector.hits[0].text.contains("sedan"),
            "{:?}",
            texts(&vector.hits)
        );
        assert!(
            vector.hits[0].score > 0.9,
            "cosine: {}",
            vector.hits[0].score
        );
    }
}

everywhere! {
    async fn vectors_respect_namespaces_and_forgetting(store) {
        let memory = seeded(store, true).await;
        // Searching first loads the vectors into RAM; what is saved afterwards must join them.
        let before = memory
            .search(request(&["agent:bob"], "vehicle", SearchMode::Vector))
            .await
            .unwrap();
        assert!(before.hits.is_empty());
        let bob = memory
            .save(item("agent:bob", "Bob's automobile is red."))
            .await
            .unwrap();
        let alice = memory
            .search(request(&["agent:alice"], "vehicle", SearchMode::Vector))
            .await
            .unwrap();
        assert!(
            !texts(&alice.hits).iter().any(|t| t.contains("Bob")),
            "alice never sees bob's"
        );
        let both = memory
            .search(request(&["agent:bob"], "vehicle", SearchMode::Vector))
            .await
            .unwrap();
        assert_eq!(texts(&both.hits)[0], "Bob's automobile is red.");

        assert!(
            !memory
                .store()
                .forget_memory(vec!["agent:alice".into()], bob.item.id)
                .await
                .unwrap(),
            "alice cannot forget bob's item"
        );
        assert!(
            memory
                .store()
                .forget_memory(vec!["agent:bob".into()], bob.item.id)
                .await
                .unwrap()
        );
        let after = memory
            .search(request(&["agent:bob"], "vehicle", SearchMode::Vector))
            .await
            .unwrap();
        assert!(after.hits.is_empty(), "{:?}", texts(&after.hits));
    }
}

both! {
    async fn without_an_embedder_search_is_keyword_only_and_says_so(store) {
        let memory = seeded(store, false).await;
        let out = memory
            .search(request(
                &["agent:alice"],
                "sync Thursday",
                SearchMode::Hybrid,
            ))
            .await
            .unwrap();
        assert_eq!(out.mode, SearchMode::Keyword);
        assert!(out.hits[0].text.contains("sync"));
        let note = out.note.unwrap();
        assert!(note.starts_with("keyword search only"), "{note}");
        assert!(note.contains("reef models pull minilm"), "{note}");
        let err = memory
            .search(request(&["agent:alice"], "sync", SearchMode::Vector))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Invalid { field: "mode", .. }),
            "{err}"
        );
    }
}

everywhere! {
    async fn items_saved_without_an_embedder_are_embedded_by_a_later_search(store) {
        let plain = memory_with(store.clone(), false);
        let saved = plain
            .save(item("agent:alice", "The team sedan needs new tyres."))
            .await
            .unwrap();
        assert!(saved.note.unwrap().contains("keyword search only"));
        let coverage = store
            .vector_coverage("concepts", vec!["agent:alice".into()])
            .await
            .unwrap();
        assert_eq!((coverage.embedded, coverage.chunks), (0, 1));

        let with = memory_with(store.clone(), true);
        let out = with
            .search(request(&["agent:alice"], "automobile", SearchMode::Vector))
            .await
            .unwrap();
        assert_eq!(texts(&out.hits), ["The team sedan needs new tyres."]);
        let coverage = store
            .vector_coverage("concepts", vec!["agent:alice".into()])
            .await
            .unwrap();
        assert_eq!((coverage.embedded, coverage.chunks), (1, 1));
    }
}

everywhere! {
    async fn vector_search_checks_its_input(store) {
        let memory = seeded(store, true).await;
        let store = memory.store();
        let err = store
            .vector_search(VectorQuery {
                namespaces: vec!["agent:alice".into()],
                embedder: "concepts".into(),
                vector: vec![1.0; 3],
                limit: 5,
                ..VectorQuery::default()
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("3 dimensions"), "{err}");
        let err = store
            .vector_search(VectorQuery {
                embedder: "concepts".into(),
                vector: vec![1.0; DIMS],
                limit: 5,
                ..VectorQuery::default()
            })
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            StoreError::Invalid {
                field: "namespaces",
                ..
            }
        ));
        let err = store
            .store_vectors("concepts", vec![(1, vec![f32::NAN; DIMS])])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not a finite number"), "{err}");
        let err = store
            .store_vectors("concepts", vec![(1, vec![1.0; 4]), (2, vec![1.0; 5])])
            .await
            .unwrap_err();
        assert!(matches!(
            err,
            StoreError::Invalid {
                field: "vectors",
                ..
            }
        ));
        assert!("sideways".parse::<SearchMode>().is_err());
    }
}

#[test]
fn rank_fusion_adds_weighted_reciprocal_ranks() {
    let hit = |id: i64| MemoryHit {
        item_id: id,
        chunk_id: id,
        namespace: "shared".into(),
        text: format!("chunk {id}"),
        tags: Vec::new(),
        source: None,
        created_at: String::new(),
        score: 0.0,
    };
    let keyword = [hit(1), hit(2)];
    let vector = [hit(2), hit(3)];
    let equal = Fusion {
        method: FusionMethod::Rrf,
        keyword_weight: 1.0,
        identifier_weight: 0.0,
        vector_weight: 1.0,
        k: 60.0,
    };
    let fused = fuse(&QueryTerms::of("chunk"), &keyword, &vector, equal, 10);
    let ids: Vec<i64> = fused.iter().map(|h| h.chunk_id).collect();
    assert_eq!(ids, [2, 1, 3], "in both lists beats first in one");
    assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-12);
    let keyword_heavy = Fusion {
        keyword_weight: 3.0,
        ..equal
    };
    let ids: Vec<i64> = fuse(
        &QueryTerms::of("chunk"),
        &keyword,
        &vector,
        keyword_heavy,
        2,
    )
    .iter()
    .map(|h| h.chunk_id)
    .collect();
    assert_eq!(ids, [2, 1], "weights shift the order; limit applies");
}

/// A unit vector along dimension `d` with a little of dimension `d + 1`.
fn axis(d: usize) -> Vec<f32> {
    let mut v = vec![0.0; DIMS];
    v[d % DIMS] = 0.95;
    v[(d + 1) % DIMS] = 0.312;
    v
}

async fn add_with_vector(store: &Store, text: &str, d: usize) -> i64 {
    let item = store
        .add_memory(
            NewMemory {
                namespace: "shared".into(),
                text: text.into(),
                tags: Vec::new(),
                source: None,
            },
            Chunking::default(),
        )
        .await
        .unwrap();
    // One chunk per short item: its id is the item's.
    store
        .store_vectors("concepts", vec![(item.id, axis(d))])
        .await
        .unwrap();
    item.id
}

both! {
    async fn another_connections_writes_reach_the_index_without_a_full_reload(place: Place) {
        let daemon = place.store().await;
        let cli = place.store().await;
        let first = add_with_vector(&daemon, "first note", 0).await;
        let search = |store: &Store, d: usize, scan: Scan| {
            let store = store.clone();
            async move {
                store
                    .vector_search(VectorQuery {
                        namespaces: vec!["shared".into()],
                        embedder: "concepts".into(),
                        vector: axis(d),
                        limit: 1,
                        scan,
                        ..VectorQuery::default()
                    })
                    .await
                    .unwrap()
                    .first()
                    .map(|h| h.item_id)
            }
        };
        assert_eq!(search(&daemon, 0, Scan::Exact).await, Some(first));
        assert_eq!(
            daemon.vector_loads(),
            VectorLoads {
                full: 1,
                incremental: 0
            }
        );
        // The other connection adds two and forgets the first.
        let second = add_with_vector(&cli, "second note", 5).await;
        let third = add_with_vector(&cli, "third note", 9).await;
        assert!(
            cli.forget_memory(vec!["shared".into()], first)
                .await
                .unwrap()
        );
        assert_eq!(search(&daemon, 5, Scan::Exact).await, Some(second));
        assert_eq!(
            search(&daemon, 9, Scan::Quantized { reranked: 1 }).await,
            Some(third)
        );
        assert_ne!(search(&daemon, 0, Scan::Exact).await, Some(first));
        assert_eq!(
            daemon.vector_loads(),
            VectorLoads {
                full: 1,
                incremental: 1
            }
        );
        // Its own writes keep it current without reading anything back.
        let fourth = add_with_vector(&daemon, "fourth note", 12).await;
        assert_eq!(search(&daemon, 12, Scan::Auto).await, Some(fourth));
        assert_eq!(
            daemon.vector_loads(),
            VectorLoads {
                full: 1,
                incremental: 1
            }
        );
    }
}

everywhere! {
    async fn with_background_embedding_a_search_answers_at_once_and_says_what_waits(store) {
        // Saved without an embedder: three chunks wait for vectors.
        let keyword_only = memory_with(store.clone(), false);
        for text in [
            "the car is parked",
            "standup at nine",
            "postgres tuning notes",
        ] {
            keyword_only
                .save(NewMemory {
                    namespace: "shared".into(),
                    text: text.into(),
                    tags: Vec::new(),
                    source: None,
                })
                .await
                .unwrap();
        }
        let daemon = memory_with(store.clone(), true).embedded_in_background();
        let found = daemon
            .search(SearchRequest {
                namespaces: vec!["shared".into()],
                text: "postgres".into(),
                limit: 3,
                ..SearchRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(found.hits[0].text, "postgres tuning notes");
        let note = found.note.unwrap();
        assert!(note.contains("3 of 3 chunks have no vector yet"), "{note}");
        // Nothing was embedded on the way; the background task's call does it.
        assert_eq!(
            store.namespaces_to_embed("concepts").await.unwrap(),
            ["shared"]
        );
        let (done, more) = daemon
            .embed_pending(vec!["shared".into()], 64)
            .await
            .unwrap();
        assert_eq!((done, more), (3, false));
        assert!(
            store
                .namespaces_to_embed("concepts")
                .await
                .unwrap()
                .is_empty()
        );
        let found = daemon
            .search(SearchRequest {
                namespaces: vec!["shared".into()],
                text: "automobile".into(),
                limit: 1,
                mode: SearchMode::Vector,
                ..SearchRequest::default()
            })
            .await
            .unwrap();
        assert_eq!(found.hits[0].text, "the car is parked");
        assert_eq!(found.note, None);
    }
}
