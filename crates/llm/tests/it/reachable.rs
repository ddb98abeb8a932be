//! `check_reachable` (used by `reef doctor`) and the shared HTTP client builder.

use crate::common::settings;
use reef_core::{ModelErrorKind, WireApi};
use reef_llm::{ProviderSettings, check_reachable};
use reef_test_support::MockLlm;

#[tokio::test]
async fn mock_is_reachable_on_both_wires_without_spending_the_script() {
    for wire in WireApi::HTTP {
        let mock = MockLlm::start(vec![]).await;
        let description = check_reachable(&settings(&mock, wire, true)).await.unwrap();
        assert!(description.contains("HTTP 200"), "{description}");
        assert!(description.contains("mock-model"), "{description}");
        let req = &mock.requests()[0];
        let path = if wire == WireApi::Ollama {
            "/v1/api/tags"
        } else {
            "/v1/models"
        };
        assert!(req.path.ends_with(path), "{}", req.path);
        match wire {
            WireApi::Ollama => {
                assert_eq!(req.header("authorization"), Some("Bearer sk-test-key"));
            }
            WireApi::OpenaiChat | WireApi::Local => {
                assert_eq!(req.header("authorization"), Some("Bearer sk-test-key"));
            }
            WireApi::Anthropic => {
                assert_eq!(req.header("x-api-key"), Some("sk-test-key"));
                assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
            }
        }
    }
}

#[tokio::test]
async fn unreachable_provider_is_an_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let settings = ProviderSettings {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        ..ProviderSettings::default()
    };
    let err = check_reachable(&settings).await.unwrap_err();
    assert_eq!(err.kind, ModelErrorKind::Connection);
    assert!(err.to_string().contains("`main`"), "{err}");
}

#[test]
fn http_client_builds_with_system_roots_or_says_why_not() {
    match reef_llm::http_client(None) {
        Ok(_) => {}
        Err(e) => assert!(e.to_string().contains("SSL_CERT_FILE"), "{e}"),
    }
}
