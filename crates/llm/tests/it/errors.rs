//! Failures: which are retried (and how often), their kinds, and what the error says.

use crate::common::{MODES, harness, harness_with, run, user};
use reef_core::ModelErrorKind;
use reef_test_support::MockReply;

fn status(code: u16, body: &str, retry_after_secs: Option<u64>) -> MockReply {
    MockReply::Status {
        code,
        body: body.into(),
        retry_after_secs,
    }
}

#[tokio::test]
async fn server_error_then_success_is_retried() {
    for (wire, stream) in MODES {
        let h = harness(
            wire,
            stream,
            vec![
                status(500, "upstream exploded", None),
                MockReply::text("recovered"),
            ],
        )
        .await;
        let response = run(h.client.as_ref(), &user("hi")).await.0.unwrap();
        assert_eq!(response.content, "recovered");
        assert_eq!(h.mock.requests().len(), 2, "{wire} {stream}");
        assert_eq!(h.mock.requests()[0].body, h.mock.requests()[1].body);
        assert_eq!(h.mock.remaining(), 0);
    }
}

#[tokio::test]
async fn rate_limit_with_retry_after_zero_is_retried() {
    for (wire, stream) in MODES {
        let h = harness(
            wire,
            stream,
            vec![
                status(429, r#"{"error":{"message":"rate limited"}}"#, Some(0)),
                MockReply::text("ok"),
            ],
        )
        .await;
        let response = run(h.client.as_ref(), &user("hi")).await.0.unwrap();
        assert_eq!(response.content, "ok");
        assert_eq!(h.mock.requests().len(), 2, "{wire} {stream}");
    }
}

#[tokio::test]
async fn retries_stop_after_max_retries() {
    let h = harness_with(
        reef_core::WireApi::OpenaiChat,
        true,
        vec![
            status(503, "busy", None),
            status(503, "busy", None),
            status(503, "still busy", None),
            MockReply::text("never reached"),
        ],
        |s| s.max_retries = 2,
    )
    .await;
    let err = run(h.client.as_ref(), &user("hi")).await.0.unwrap_err();
    assert_eq!(err.kind, ModelErrorKind::Server);
    assert_eq!(err.status, Some(503));
    assert!(err.message.contains("still busy"), "{err}");
    assert_eq!(h.mock.requests().len(), 3);
    assert_eq!(h.mock.remaining(), 1);
}

#[tokio::test]
async fn unauthorized_is_not_retried() {
    for (wire, stream) in MODES {
        let h = harness(
            wire,
            stream,
            vec![
                status(
                    401,
                    r#"{"error":{"type":"auth","message":"Invalid API key"}}"#,
                    None,
                ),
                MockReply::text("never reached"),
            ],
        )
        .await;
        let err = run(h.client.as_ref(), &user("hi")).await.0.unwrap_err();
        assert_eq!(err.kind, ModelErrorKind::Auth);
        assert_eq!(err.status, Some(401));
        assert_eq!(err.provider, "mocked");
        let text = err.to_string();
        assert!(text.contains("`mocked`") && text.contains("401"), "{text}");
        assert!(text.contains("Invalid API key"), "{text}");
        assert_eq!(h.mock.requests().len(), 1, "{wire} {stream}");
        assert_eq!(h.mock.remaining(), 1);
    }
}

#[tokio::test]
async fn not_found_and_bad_request_are_not_retried() {
    let cases = [
        (404, "model not found", ModelErrorKind::NotFound),
        (
            400,
            r#"{"error":{"message":"unknown field"}}"#,
            ModelErrorKind::BadRequest,
        ),
        (
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#,
            ModelErrorKind::ContextLength,
        ),
    ];
    for (wire, stream) in MODES {
        for (code, body, kind) in cases {
            let h = harness(wire, stream, vec![status(code, body, None)]).await;
            let err = run(h.client.as_ref(), &user("hi")).await.0.unwrap_err();
            assert_eq!(err.kind, kind, "{wire} {stream} {code}");
            assert_eq!(err.status, Some(code));
            assert_eq!(h.mock.requests().len(), 1);
        }
    }
}

#[tokio::test]
async fn long_error_bodies_are_cut_to_an_excerpt() {
    let body = "x".repeat(5000);
    let h = harness(
        reef_core::WireApi::Anthropic,
        false,
        vec![status(403, &body, None)],
    )
    .await;
    let err = run(h.client.as_ref(), &user("hi")).await.0.unwrap_err();
    assert_eq!(err.kind, ModelErrorKind::Auth);
    assert!(err.message.chars().count() <= 301, "{}", err.message.len());
}

#[tokio::test]
async fn malformed_body_fails_after_retries() {
    for (wire, stream) in MODES {
        let h = harness(
            wire,
            stream,
            vec![
                MockReply::MalformedBody("<html>oops</html>".into()),
                MockReply::MalformedBody("<html>oops</html>".into()),
            ],
        )
        .await;
        let err = run(h.client.as_ref(), &user("hi")).await.0.unwrap_err();
        assert_eq!(
            err.kind,
            ModelErrorKind::Malformed,
            "{wire} {stream}: {err}"
        );
        assert_eq!(err.provider, "mocked");
        assert_eq!(
            h.mock.requests().len(),
            2,
            "max_retries 1 means two attempts"
        );
    }
}

#[tokio::test]
async fn cut_stream_is_malformed() {
    for (wire, stream) in MODES {
        let h = harness_with(
            wire,
            stream,
            vec![MockReply::StreamCut("Half an ans".into())],
            |s| {
                s.max_retries = 0;
            },
        )
        .await;
        let (result, deltas) = run(h.client.as_ref(), &user("hi")).await;
        let err = result.unwrap_err();
        assert_eq!(
            err.kind,
            ModelErrorKind::Malformed,
            "{wire} {stream}: {err}"
        );
        if stream {
            assert_eq!(deltas.concat(), "Half an ans", "deltas seen before the cut");
        }
        assert_eq!(h.mock.requests().len(), 1);
    }
}

#[tokio::test]
async fn exhausted_script_is_a_server_error() {
    let h = harness(reef_core::WireApi::OpenaiChat, false, vec![]).await;
    let err = run(h.client.as_ref(), &user("hi")).await.0.unwrap_err();
    assert_eq!(err.kind, ModelErrorKind::Server);
    assert!(err.message.contains("mock script exhausted"), "{err}");
    assert_eq!(h.mock.requests().len(), 2);
}

#[tokio::test]
async fn connection_refused_is_a_connection_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let settings = reef_llm::ProviderSettings {
        name: "gone".into(),
        base_url: format!("http://127.0.0.1:{port}/v1"),
        max_retries: 0,
        ..reef_llm::ProviderSettings::default()
    };
    let client = reef_llm::build_client(settings).unwrap();
    let err = run(client.as_ref(), &user("hi")).await.0.unwrap_err();
    assert_eq!(err.kind, ModelErrorKind::Connection, "{err}");
    assert_eq!(err.provider, "gone");
}
