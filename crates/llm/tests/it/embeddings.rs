//! The OpenAI-compatible embeddings client against the mock server: what it sends, vectors in
//! input order and unit length, batching, and a connection failure with its kind.

use crate::common::settings;
use reef_core::{ModelErrorKind, WireApi};
use reef_llm::{EmbedderSettings, build_embedder};
use reef_test_support::{MockLlm, bag_of_words};

#[tokio::test]
async fn embeds_in_input_order_with_unit_vectors_and_batches_large_inputs() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut provider = settings(&mock, WireApi::OpenaiChat, false);
    provider.model = "text-embedding-test".into();
    let embedder = build_embedder(EmbedderSettings::Http(provider)).unwrap();
    assert_eq!(embedder.id(), "mocked:text-embedding-test");
    assert_eq!(embedder.dimensions(), 0, "unknown before the first reply");

    let texts: Vec<String> = (0..70)
        .map(|i| format!("note number {i} about deploys"))
        .collect();
    let vectors = embedder.embed(&texts).await.unwrap();
    assert_eq!(vectors.len(), 70);
    assert_eq!(embedder.dimensions(), 16);
    for (text, v) in texts.iter().zip(&vectors) {
        let mut expected = bag_of_words(text);
        reef_core::normalize(&mut expected);
        assert_eq!(
            v, &expected,
            "{text}: sorted back into input order, normalised"
        );
    }

    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "64 texts per request");
    assert_eq!(requests[0].path, "/v1/embeddings");
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-test-key")
    );
    assert_eq!(requests[0].body["model"], "text-embedding-test");
    assert_eq!(requests[0].body["input"].as_array().unwrap().len(), 64);
    assert_eq!(requests[1].body["input"][5], texts[69]);
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_connection_error_naming_the_provider() {
    let mock = MockLlm::start(Vec::new()).await;
    let mut provider = settings(&mock, WireApi::OpenaiChat, false);
    // A port nothing listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    provider.base_url = format!("http://127.0.0.1:{port}/v1");
    let embedder = build_embedder(EmbedderSettings::Http(provider)).unwrap();
    let err = match embedder.embed(&["x".to_owned()]).await {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e,
    };
    assert_eq!(err.provider, "mocked");
    assert_eq!(err.kind, ModelErrorKind::Connection, "{err}");
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn a_local_model_that_is_not_pulled_names_the_pull_command_until_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = build_embedder(EmbedderSettings::Local {
        name: "minilm".into(),
        dir: dir.path().to_owned(),
        threads: 1,
    })
    .unwrap();
    assert_eq!(embedder.id(), "minilm");
    let err = match embedder.embed(&["x".to_owned()]).await {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e,
    };
    assert_eq!(err.kind, ModelErrorKind::NotFound);
    assert!(err.to_string().contains("reef models pull minilm"), "{err}");
    // Files put there later are picked up by the same embedder (here: present but not a
    // model, so loading fails instead of reporting them missing).
    for file in [
        "minilm.safetensors",
        "minilm.tokenizer.json",
        "minilm.config.json",
    ] {
        std::fs::write(dir.path().join(file), b"{}").unwrap();
    }
    let err = match embedder.embed(&["x".to_owned()]).await {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e,
    };
    assert!(!err.to_string().contains("not installed"), "{err}");
    assert!(err.to_string().contains("minilm.config.json"), "{err}");
}
