//! Provider traffic the scripted mock cannot produce: hand-written HTTP responses served by a
//! raw TCP listener (stalled streams, tool-call deltas without `index`, typed stream errors,
//! usage spread over several events).

use crate::common::{run, user};
use reef_core::{ModelErrorKind, WireApi};
use reef_llm::{ProviderSettings, build_client};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One scripted HTTP response: status, content type, body pieces, and whether to stall
/// (keep the connection open without sending anything) after the pieces.
#[derive(Clone)]
pub struct Raw {
    pub status: u16,
    pub content_type: &'static str,
    pub extra_headers: Vec<String>,
    pub pieces: Vec<String>,
    pub stall: bool,
}

impl Raw {
    pub fn sse(pieces: &[&str]) -> Raw {
        Raw {
            status: 200,
            content_type: "text/event-stream",
            extra_headers: Vec::new(),
            pieces: pieces.iter().map(|p| (*p).to_owned()).collect(),
            stall: false,
        }
    }
}

/// Serves `responses` in order, one per connection; returns the base URL.
pub async fn serve(responses: Vec<Raw>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        for raw in responses {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                read_request(&mut sock).await;
                let mut head = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: {}\r\nconnection: close\r\n",
                    raw.status, raw.content_type
                );
                for h in &raw.extra_headers {
                    head.push_str(h);
                    head.push_str("\r\n");
                }
                head.push_str("\r\n");
                let _ = sock.write_all(head.as_bytes()).await;
                for piece in &raw.pieces {
                    let _ = sock.write_all(piece.as_bytes()).await;
                    let _ = sock.flush().await;
                }
                if raw.stall {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            });
        }
    });
    format!("http://{addr}/v1")
}

async fn read_request(sock: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Ok(n) = sock.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return;
            }
        }
    }
}

pub fn settings(base_url: String, wire_api: WireApi) -> ProviderSettings {
    ProviderSettings {
        name: "raw".into(),
        wire_api,
        base_url,
        max_retries: 0,
        retry_base: Duration::from_millis(1),
        request_timeout: Duration::from_secs(5),
        ..ProviderSettings::default()
    }
}

fn data(json: &str) -> String {
    format!("data: {json}\n\n")
}

fn event(name: &str, json: &str) -> String {
    format!("event: {name}\ndata: {json}\n\n")
}

#[tokio::test]
async fn a_stalled_stream_times_out_instead_of_hanging() {
    for wire in WireApi::HTTP {
        let first = match wire {
            WireApi::OpenaiChat | WireApi::Local => {
                data(r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#)
            }
            WireApi::Ollama => "{\"message\":{\"content\":\"Hel\"},\"done\":false}\n".to_owned(),
            WireApi::Anthropic => event(
                "message_start",
                r#"{"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}"#,
            ),
        };
        let mut raw = Raw::sse(&[&first]);
        raw.stall = true;
        let base = serve(vec![raw]).await;
        let mut s = settings(base, wire);
        s.request_timeout = Duration::from_millis(300);
        let client = build_client(s).unwrap();
        let started = std::time::Instant::now();
        let err = tokio::time::timeout(Duration::from_secs(10), run(client.as_ref(), &user("hi")))
            .await
            .expect("the client must give up on a stalled stream")
            .0
            .unwrap_err();
        assert_eq!(err.kind, ModelErrorKind::Timeout, "{wire}: {err}");
        assert!(err.to_string().contains("`raw`"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

#[tokio::test]
async fn openai_tool_call_deltas_without_index_stay_separate() {
    // Some OpenAI-compatible servers omit `index` and send each call in its own chunk.
    let base = serve(vec![Raw::sse(&[
        &data(
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"path\":"}}]}}]}"#,
        ),
        &data(
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"\"a\"}"}}]}}]}"#,
        ),
        &data(
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c2","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}}]}}]}"#,
        ),
        &data(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#),
        &data(r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#),
        "data: [DONE]\n\n",
    ])])
    .await;
    let client = build_client(settings(base, WireApi::OpenaiChat)).unwrap();
    let response = run(client.as_ref(), &user("go")).await.0.unwrap();
    let calls: Vec<_> = response
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("c1", "read_file", r#"{"path":"a"}"#),
            ("c2", "shell", r#"{"cmd":"ls"}"#)
        ]
    );
    assert_eq!(response.usage.output_tokens, 4);
}

#[tokio::test]
async fn openai_chunks_with_a_null_error_field_are_not_errors() {
    let base = serve(vec![Raw::sse(&[
        &data(r#"{"error":null,"choices":[{"index":0,"delta":{"content":"ok"}}]}"#),
        &data(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
        "data: [DONE]\n\n",
    ])])
    .await;
    let client = build_client(settings(base, WireApi::OpenaiChat)).unwrap();
    let response = run(client.as_ref(), &user("go")).await.0.unwrap();
    assert_eq!(response.content, "ok");
}

#[tokio::test]
async fn anthropic_stream_errors_keep_their_class() {
    let cases = [
        ("invalid_request_error", ModelErrorKind::BadRequest),
        ("authentication_error", ModelErrorKind::Auth),
        ("permission_error", ModelErrorKind::Auth),
        ("not_found_error", ModelErrorKind::NotFound),
        ("rate_limit_error", ModelErrorKind::RateLimited),
        ("overloaded_error", ModelErrorKind::Server),
        ("api_error", ModelErrorKind::Server),
    ];
    for (error_type, kind) in cases {
        let body =
            format!(r#"{{"type":"error","error":{{"type":"{error_type}","message":"boom"}}}}"#);
        let base = serve(vec![Raw::sse(&[&event("error", &body)])]).await;
        let client = build_client(settings(base, WireApi::Anthropic)).unwrap();
        let err = run(client.as_ref(), &user("go")).await.0.unwrap_err();
        assert_eq!(err.kind, kind, "{error_type}: {err}");
        assert!(err.message.contains("boom"), "{err}");
    }
}

#[tokio::test]
async fn anthropic_message_delta_usage_keeps_fields_it_does_not_repeat() {
    let base = serve(vec![Raw::sse(&[
        &event(
            "message_start",
            r#"{"type":"message_start","message":{"model":"claude-t","usage":{"input_tokens":5,"cache_read_input_tokens":20,"cache_creation_input_tokens":0,"output_tokens":1}}}"#,
        ),
        &event(
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        &event(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
        ),
        &event(
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":5,"output_tokens":7}}"#,
        ),
        &event("message_stop", r#"{"type":"message_stop"}"#),
    ])])
    .await;
    let client = build_client(settings(base, WireApi::Anthropic)).unwrap();
    let response = run(client.as_ref(), &user("go")).await.0.unwrap();
    assert_eq!(response.content, "hi");
    assert_eq!(response.usage.input_tokens, 25);
    assert_eq!(response.usage.cached_input_tokens, 20);
    assert_eq!(response.usage.output_tokens, 7);
}

#[tokio::test]
async fn an_invalid_api_key_header_is_not_retried_as_a_connection_error() {
    let base = serve(vec![]).await;
    let mut s = settings(base, WireApi::OpenaiChat);
    s.api_key = Some("sk-bad\nkey".into());
    s.max_retries = 3;
    s.retry_base = Duration::from_secs(10);
    let client = build_client(s).unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), run(client.as_ref(), &user("go")))
        .await
        .expect("a request that cannot be built must not be retried with backoff")
        .0
        .unwrap_err();
    assert_eq!(err.kind, ModelErrorKind::BadRequest, "{err}");
}

#[tokio::test]
async fn huge_error_bodies_are_not_read_whole() {
    // 64 MiB of error body would be read completely before; only an excerpt is needed.
    let piece = "x".repeat(1024 * 1024);
    let mut raw = Raw::sse(&[]);
    raw.status = 500;
    raw.content_type = "text/plain";
    raw.pieces = vec![piece; 4];
    raw.stall = true;
    let base = serve(vec![raw]).await;
    let mut s = settings(base, WireApi::OpenaiChat);
    s.request_timeout = Duration::from_secs(3);
    let client = build_client(s).unwrap();
    let err = run(client.as_ref(), &user("go")).await.0.unwrap_err();
    // The body never ends (the server stalls), so reading it whole would time out.
    assert_eq!(err.kind, ModelErrorKind::Server, "{err}");
    assert_eq!(err.status, Some(500));
}

#[tokio::test]
async fn fractional_retry_after_is_honoured() {
    let mut limited = Raw::sse(&[r#"{"error":{"message":"slow down"}}"#]);
    limited.status = 429;
    limited.content_type = "application/json";
    limited.extra_headers = vec!["retry-after: 0.2".into()];
    let ok = Raw::sse(&[
        &data(r#"{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}"#),
        "data: [DONE]\n\n",
    ]);
    let base = serve(vec![limited, ok]).await;
    let mut s = settings(base, WireApi::OpenaiChat);
    s.max_retries = 1;
    // Without Retry-After the backoff would be 20 s.
    s.retry_base = Duration::from_secs(20);
    let client = build_client(s).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), run(client.as_ref(), &user("go")))
        .await
        .expect("Retry-After: 0.2 must be honoured")
        .0
        .unwrap();
    assert_eq!(response.content, "ok");
}
