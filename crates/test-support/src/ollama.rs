//! Renders mock replies in Ollama's `/api/chat` format: one JSON object, or NDJSON lines
//! ending with a `"done": true` line that carries the token counts.

use crate::reply::{Action, Completion, split_chars};
use crate::server::{json_response, status_response};
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::convert::Infallible;

/// Characters per streamed text piece.
const TEXT_PIECE: usize = 5;

pub(crate) fn render(action: Action, stream: bool) -> Response {
    match (action, stream) {
        (Action::Complete(c), false) => json_response(done_line(&c, &c.text, true).to_string()),
        (Action::Complete(c), true) => ndjson_response(stream_lines(&c)),
        (Action::Malformed(body), false) => json_response(body),
        (Action::Malformed(body), true) => ndjson_response(vec![format!("{body}\n")]),
        (Action::Cut { text, model, .. }, false) => {
            let full = json!({"model": model, "message": {"role": "assistant", "content": text},
                              "done": true})
            .to_string();
            let half: String = full.chars().take(full.chars().count() / 2).collect();
            json_response(half)
        }
        (Action::Cut { text, model, .. }, true) => {
            let line = json!({"model": model, "message": {"role": "assistant", "content": text},
                              "done": false});
            ndjson_response(vec![format!("{line}\n")])
        }
        (
            Action::Status {
                code,
                body,
                retry_after_secs,
            },
            _,
        ) => {
            let body = if serde_json::from_str::<Value>(&body).is_ok() {
                body
            } else {
                json!({"error": body}).to_string()
            };
            status_response(code, body, retry_after_secs)
        }
    }
}

fn calls_json(c: &Completion) -> Value {
    c.calls
        .iter()
        .map(|call| {
            let arguments = serde_json::from_str::<Value>(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            json!({"function": {"name": call.name, "arguments": arguments}})
        })
        .collect()
}

/// The final object: with `full` the whole message (non-streamed), else only the counts.
fn done_line(c: &Completion, text: &str, full: bool) -> Value {
    let mut message = json!({"role": "assistant", "content": text});
    if full && c.has_calls() {
        message["tool_calls"] = calls_json(c);
    }
    json!({
        "model": c.model,
        "created_at": "2025-01-01T00:00:00Z",
        "message": message,
        "done": true,
        "done_reason": "stop",
        "prompt_eval_count": c.input_tokens,
        "eval_count": c.output_tokens(),
    })
}

fn stream_lines(c: &Completion) -> Vec<String> {
    let mut lines = Vec::new();
    for piece in split_chars(&c.text, TEXT_PIECE) {
        let line = json!({"model": c.model, "message": {"role": "assistant", "content": piece},
                          "done": false});
        lines.push(format!("{line}\n"));
    }
    if c.has_calls() {
        let line = json!({"model": c.model,
                          "message": {"role": "assistant", "content": "",
                                      "tool_calls": calls_json(c)},
                          "done": false});
        lines.push(format!("{line}\n"));
    }
    lines.push(format!("{}\n", done_line(c, "", false)));
    lines
}

fn ndjson_response(lines: Vec<String>) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    let chunks = lines
        .into_iter()
        .map(|l| Ok::<_, Infallible>(Bytes::from(l)));
    let body = Body::from_stream(futures::stream::iter(chunks));
    (StatusCode::OK, headers, body).into_response()
}
