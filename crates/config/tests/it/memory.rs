//! `[memory]`: defaults, the embedder choice, and errors naming the key.

use crate::{Fixture, MAIN};
use reef_config::{EmbedderChoice, FusionChoice};
use std::path::Path;

#[test]
fn defaults_use_the_local_minilm_model_and_half_weight_keywords() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    let config = fx.load(&[], &[]).unwrap();
    let m = &config.memory;
    assert_eq!(
        m.embedder,
        EmbedderChoice::Local {
            model: "minilm".into()
        }
    );
    assert_eq!((m.chunk_size, m.chunk_overlap), (800, 100));
    assert_eq!(m.fusion, FusionChoice::Evidence);
    assert_eq!(
        (m.keyword_weight, m.vector_weight, m.rrf_k),
        (None, 1.0, 60.0)
    );
    assert_eq!(m.notes_max_chars, 4000);
}

#[test]
fn a_provider_embedder_needs_an_openai_compatible_provider_and_a_model() {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!("{MAIN}\n[memory]\nembedder = \"provider:main\"\nembedding_model = \"text-embedding-3-small\"\n"),
    );
    let config = fx.load(&[], &[]).unwrap();
    assert_eq!(
        config.memory.embedder,
        EmbedderChoice::Provider {
            provider: "main".into(),
            model: "text-embedding-3-small".into()
        }
    );
    for (memory, key, says) in [
        (
            "embedder = \"provider:nope\"",
            "memory.embedder",
            "no provider `nope`",
        ),
        (
            "embedder = \"provider:main\"",
            "memory.embedding_model",
            "is required",
        ),
        (
            "embedding_model = \"x\"",
            "memory.embedding_model",
            "only used with",
        ),
        (
            "chunk_overlap = 900",
            "memory.chunk_overlap",
            "smaller than chunk_size",
        ),
        (
            "keyword_weight = -1.0",
            "memory.keyword_weight",
            "not a weight",
        ),
        (
            "keyword_weight = 0.0\nvector_weight = 0.0",
            "memory.vector_weight",
            "both 0",
        ),
        ("rrf_k = -2.0", "memory.rrf_k", "rank constant"),
        ("fusion = \"max\"", "memory.fusion", "evidence or rrf"),
        ("embed_threads = 0", "memory.embed_threads", "at least 1"),
        ("embedder = \"\"", "memory.embedder", "is empty"),
    ] {
        fx.write(
            Path::new("home/reef.toml"),
            &format!("{MAIN}\n[memory]\n{memory}\n"),
        );
        let text = fx.load(&[], &[]).unwrap_err().to_string();
        assert!(
            text.contains(key) && text.contains(says),
            "{memory}: {text}"
        );
    }
}
