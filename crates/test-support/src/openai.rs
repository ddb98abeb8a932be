//! Renders mock replies in the OpenAI chat-completions wire format, plain JSON or SSE chunks.

use crate::reply::{Action, Completion, split_chars};
use crate::server::{json_response, sse_response, status_response};
use axum::response::Response;
use serde_json::{Value, json};

/// Characters per streamed text delta and per streamed argument fragment.
const TEXT_PIECE: usize = 5;
const ARGS_PIECE: usize = 7;

/// Options the request chose that shape the reply.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mode {
    pub stream: bool,
    pub include_usage: bool,
}

pub(crate) fn render(action: Action, mode: Mode) -> Response {
    match (action, mode.stream) {
        (Action::Complete(c), false) => json_response(complete_body(&c).to_string()),
        (Action::Complete(c), true) => sse_response(stream_events(&c, mode.include_usage)),
        (Action::Malformed(body), false) => json_response(body),
        (Action::Malformed(body), true) => sse_response(vec![format!("data: {body}\n\n")]),
        (Action::Cut { text, model, .. }, false) => {
            let full = json!({"id": "chatcmpl-mock", "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})
            .to_string();
            json_response(truncate_half(&full))
        }
        (Action::Cut { text, model, .. }, true) => {
            let first = chunk(&model, json!({"role": "assistant", "content": text}), None);
            sse_response(vec![data(&first, mode.include_usage)])
        }
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

fn usage(c: &Completion) -> Value {
    let output = c.output_tokens();
    json!({
        "prompt_tokens": c.input_tokens,
        "completion_tokens": output,
        "total_tokens": c.input_tokens + output,
        "prompt_tokens_details": {"cached_tokens": 0}
    })
}

fn finish_reason(c: &Completion) -> &'static str {
    if c.has_calls() { "tool_calls" } else { "stop" }
}

fn complete_body(c: &Completion) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": if c.text.is_empty() && c.has_calls() { Value::Null } else { json!(c.text) },
    });
    if c.has_calls() {
        message["tool_calls"] = c
            .calls
            .iter()
            .map(|call| {
                json!({"id": call.id, "type": "function",
                       "function": {"name": call.name, "arguments": call.arguments}})
            })
            .collect();
    }
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": c.model,
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": finish_reason(c)}],
        "usage": usage(c),
    })
}

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    })
}

/// One `data:` line; like OpenAI, chunks carry `"usage": null` when usage was requested.
fn data(chunk: &Value, include_usage: bool) -> String {
    let mut chunk = chunk.clone();
    if include_usage && chunk.get("usage").is_none() {
        chunk["usage"] = Value::Null;
    }
    format!("data: {chunk}\n\n")
}

fn stream_events(c: &Completion, include_usage: bool) -> Vec<String> {
    let mut chunks = vec![chunk(
        &c.model,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    for piece in split_chars(&c.text, TEXT_PIECE) {
        chunks.push(chunk(&c.model, json!({"content": piece}), None));
    }
    for (index, call) in c.calls.iter().enumerate() {
        chunks.push(chunk(
            &c.model,
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                                   "function": {"name": call.name, "arguments": ""}}]}),
            None,
        ));
        for piece in split_chars(&call.arguments, ARGS_PIECE) {
            chunks.push(chunk(
                &c.model,
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    chunks.push(chunk(&c.model, json!({}), Some(finish_reason(c))));
    let mut events: Vec<String> = chunks.iter().map(|ch| data(ch, include_usage)).collect();
    if include_usage {
        let last = json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": c.model,
            "choices": [],
            "usage": usage(c),
        });
        events.push(format!("data: {last}\n\n"));
    }
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// The first half of a JSON text (on a character boundary): never valid JSON.
pub(crate) fn truncate_half(full: &str) -> String {
    let chars: Vec<char> = full.chars().collect();
    chars[..chars.len() / 2].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::PlannedCall;

    fn completion() -> Completion {
        Completion {
            text: "Hello, world".into(),
            calls: vec![PlannedCall {
                id: "call_1".into(),
                name: "shell".into(),
                arguments: r#"{"command":"ls -la"}"#.into(),
            }],
            model: "m".into(),
            input_tokens: 7,
        }
    }

    #[test]
    fn stream_reassembles_to_the_same_reply() {
        let events = stream_events(&completion(), true);
        assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
        let mut text = String::new();
        let mut args = String::new();
        let mut usage = None;
        for e in &events[..events.len() - 1] {
            let v: Value = serde_json::from_str(e.trim_start_matches("data: ").trim()).unwrap();
            if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                usage = Some(u.clone());
            }
            let Some(delta) = v.pointer("/choices/0/delta") else {
                continue;
            };
            text.push_str(delta.get("content").and_then(Value::as_str).unwrap_or(""));
            if let Some(a) = delta.pointer("/tool_calls/0/function/arguments") {
                args.push_str(a.as_str().unwrap());
            }
        }
        assert_eq!(text, "Hello, world");
        assert_eq!(args, r#"{"command":"ls -la"}"#);
        assert_eq!(usage.unwrap()["prompt_tokens"], 7);
        assert!(
            events.len() > 6,
            "text and arguments arrive in several chunks"
        );
    }

    #[test]
    fn non_stream_body_has_tool_calls_and_usage() {
        let body = complete_body(&completion());
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            r#"{"command":"ls -la"}"#
        );
        assert_eq!(body["usage"]["completion_tokens"], 9);
    }
}
