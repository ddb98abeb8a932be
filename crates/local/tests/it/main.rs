//! Integration tests of reef-local without a model file: the window it reports and what a
//! count does when the model cannot load. The exact count against a real model is checked in
//! `crates/models/tests/it/local.rs`, which pulls the small test model.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

use reef_core::{Message, ModelClient, ModelRequest};
use reef_local::{LocalClient, LocalSettings};
use std::path::PathBuf;

#[tokio::test]
async fn count_tokens_is_none_when_the_model_cannot_load() {
    let client = LocalClient::new(LocalSettings {
        provider: "local".into(),
        model: "absent".into(),
        model_path: PathBuf::from("/nonexistent/reef-local-it/absent.gguf"),
        threads: Some(2),
        context_tokens: 4096,
        max_output_tokens: 2,
        sampling: reef_core::Sampling::default(),
    });
    assert_eq!(client.context_tokens(), Some(4096));
    let request = ModelRequest {
        messages: vec![Message::user("Say hi.")],
        tools: Vec::new(),
        max_output_tokens: Some(2),
        ..Default::default()
    };
    assert_eq!(client.count_tokens(&request).await, None);
}
