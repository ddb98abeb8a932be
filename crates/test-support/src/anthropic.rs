//! Renders mock replies in the Anthropic Messages wire format, plain JSON or SSE events.

use crate::openai::truncate_half;
use crate::reply::{Action, Completion, split_chars};
use crate::server::{json_response, sse_response, status_response};
use axum::response::Response;
use serde_json::{Value, json};

/// Characters per streamed text delta and per streamed `partial_json` fragment.
const TEXT_PIECE: usize = 5;
const ARGS_PIECE: usize = 7;

pub(crate) fn render(action: Action, stream: bool) -> Response {
    match (action, stream) {
        (Action::Complete(c), false) => json_response(complete_body(&c).to_string()),
        (Action::Complete(c), true) => sse_response(stream_events(&c)),
        (Action::Malformed(body), false) => json_response(body),
        (Action::Malformed(body), true) => {
            sse_response(vec![format!("event: message_start\ndata: {body}\n\n")])
        }
        (
            Action::Cut {
                text,
                model,
                input_tokens,
            },
            false,
        ) => {
            let full = json!({"id": "msg_mock", "type": "message", "role": "assistant",
                "model": model, "content": [{"type": "text", "text": text}],
                "usage": {"input_tokens": input_tokens}})
            .to_string();
            json_response(truncate_half(&full))
        }
        (
            Action::Cut {
                text,
                model,
                input_tokens,
            },
            true,
        ) => sse_response(vec![
            event("message_start", &message_start(&model, input_tokens)),
            event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0,
                        "content_block": {"type": "text", "text": ""}}),
            ),
            event("content_block_delta", &text_delta(0, &text)),
        ]),
        (
            Action::Status {
                code,
                body,
                retry_after_secs,
            },
            _,
        ) => status_response(code, body, retry_after_secs),
    }
}

fn stop_reason(c: &Completion) -> &'static str {
    if c.has_calls() {
        "tool_use"
    } else {
        "end_turn"
    }
}

/// `input` must be a JSON object on this wire; invalid JSON arguments are sent as a string.
fn input_value(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}

fn complete_body(c: &Completion) -> Value {
    let mut content = Vec::new();
    if !c.text.is_empty() || !c.has_calls() {
        content.push(json!({"type": "text", "text": c.text}));
    }
    for call in &c.calls {
        content.push(json!({"type": "tool_use", "id": call.id, "name": call.name,
                            "input": input_value(&call.arguments)}));
    }
    json!({
        "id": "msg_mock",
        "type": "message",
        "role": "assistant",
        "model": c.model,
        "content": content,
        "stop_reason": stop_reason(c),
        "stop_sequence": null,
        "usage": {
            "input_tokens": c.input_tokens,
            "output_tokens": c.output_tokens(),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0
        },
    })
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn message_start(model: &str, input_tokens: u64) -> Value {
    json!({
        "type": "message_start",
        "message": {
            "id": "msg_mock", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        }
    })
}

fn text_delta(index: usize, text: &str) -> Value {
    json!({"type": "content_block_delta", "index": index,
           "delta": {"type": "text_delta", "text": text}})
}

fn stream_events(c: &Completion) -> Vec<String> {
    let mut events = vec![
        event("message_start", &message_start(&c.model, c.input_tokens)),
        event("ping", &json!({"type": "ping"})),
    ];
    let mut index = 0;
    if !c.text.is_empty() || !c.has_calls() {
        events.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "text", "text": ""}}),
        ));
        for piece in split_chars(&c.text, TEXT_PIECE) {
            events.push(event("content_block_delta", &text_delta(index, &piece)));
        }
        events.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for call in &c.calls {
        events.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": call.id, "name": call.name,
                                      "input": {}}}),
        ));
        for piece in split_chars(&call.arguments, ARGS_PIECE) {
            events.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        events.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    events.push(event(
        "message_delta",
        &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(c), "stop_sequence": null},
                "usage": {"output_tokens": c.output_tokens()}}),
    ));
    events.push(event("message_stop", &json!({"type": "message_stop"})));
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::PlannedCall;

    fn completion() -> Completion {
        Completion {
            text: String::new(),
            calls: vec![PlannedCall {
                id: "toolu_1".into(),
                name: "read".into(),
                arguments: r#"{"path":"a/b.txt"}"#.into(),
            }],
            model: "claude".into(),
            input_tokens: 3,
        }
    }

    #[test]
    fn stream_has_tool_use_block_with_split_json() {
        let events = stream_events(&completion());
        let names: Vec<&str> = events
            .iter()
            .map(|e| e.lines().next().unwrap().trim_start_matches("event: "))
            .collect();
        assert_eq!(names.first(), Some(&"message_start"));
        assert_eq!(names.last(), Some(&"message_stop"));
        let mut partial = String::new();
        for e in &events {
            let data = e.lines().nth(1).unwrap().trim_start_matches("data: ");
            let v: Value = serde_json::from_str(data).unwrap();
            if let Some(p) = v.pointer("/delta/partial_json") {
                partial.push_str(p.as_str().unwrap());
            }
        }
        assert_eq!(partial, r#"{"path":"a/b.txt"}"#);
        assert!(
            names
                .iter()
                .filter(|n| **n == "content_block_delta")
                .count()
                > 1
        );
    }

    #[test]
    fn non_stream_body_has_tool_use_and_usage() {
        let body = complete_body(&completion());
        assert_eq!(body["stop_reason"], "tool_use");
        assert_eq!(body["content"][0]["input"]["path"], "a/b.txt");
        assert_eq!(body["usage"]["input_tokens"], 3);
    }
}
