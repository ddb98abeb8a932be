//! Anthropic Messages streaming: assembles a reply from `message_start`, `content_block_*`,
//! `message_delta` and `message_stop` events, accumulating tool input per content block.

use crate::anthropic::{input_arguments, stop_reason};
use crate::http::Transport;
use crate::retry::truncate;
use crate::wire::{str_at, tool_call, u64_at};
use reef_core::{ModelError, ModelErrorKind, ModelResponse, Usage};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// What a stream has delivered so far; tool input is accumulated per content block.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    content: String,
    calls: BTreeMap<u64, PartialCall>,
    usage: Usage,
    stop: Option<String>,
    model: Option<String>,
    /// The latest `input_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`.
    input_parts: [u64; 3],
}

impl StreamState {
    /// Handles one event; returns true at `message_stop`.
    pub(crate) fn on_event(
        &mut self,
        t: &Transport,
        name: Option<&str>,
        data: &str,
        on_delta: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<bool, ModelError> {
        let v: Value = serde_json::from_str(data).map_err(|e| {
            t.error(
                ModelErrorKind::Malformed,
                format!("invalid stream event ({e}): {}", truncate(data, 200)),
            )
        })?;
        let index = u64_at(&v, "/index");
        match str_at(&v, "/type").or(name).unwrap_or("") {
            "message_start" => {
                if let Some(model) = str_at(&v, "/message/model") {
                    self.model = Some(model.to_owned());
                }
                if let Some(u) = v.pointer("/message/usage") {
                    self.merge_usage(u);
                }
            }
            "content_block_start" => {
                let block = v.get("content_block").unwrap_or(&Value::Null);
                match str_at(block, "/type") {
                    Some("tool_use") => {
                        let input = block.get("input").filter(|i| {
                            i.as_object().is_some_and(|o| !o.is_empty()) || i.is_string()
                        });
                        self.calls.insert(
                            index,
                            PartialCall {
                                id: str_at(block, "/id").unwrap_or("").to_owned(),
                                name: str_at(block, "/name").unwrap_or("").to_owned(),
                                arguments: input
                                    .map(|i| input_arguments(Some(i)))
                                    .unwrap_or_default(),
                            },
                        );
                    }
                    Some("text") => self.text(str_at(block, "/text").unwrap_or(""), on_delta),
                    _ => {}
                }
            }
            "content_block_delta" => match str_at(&v, "/delta/type") {
                Some("text_delta") => self.text(str_at(&v, "/delta/text").unwrap_or(""), on_delta),
                Some("input_json_delta") => {
                    let part = str_at(&v, "/delta/partial_json").unwrap_or("");
                    self.calls
                        .entry(index)
                        .or_default()
                        .arguments
                        .push_str(part);
                }
                _ => {}
            },
            "message_delta" => {
                if let Some(reason) = str_at(&v, "/delta/stop_reason") {
                    self.stop = Some(reason.to_owned());
                }
                if let Some(u) = v.get("usage") {
                    self.merge_usage(u);
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let kind = match str_at(&v, "/error/type") {
                    Some("rate_limit_error") => ModelErrorKind::RateLimited,
                    Some("invalid_request_error" | "request_too_large") => {
                        ModelErrorKind::BadRequest
                    }
                    Some("authentication_error" | "permission_error") => ModelErrorKind::Auth,
                    Some("not_found_error") => ModelErrorKind::NotFound,
                    _ => ModelErrorKind::Server,
                };
                let message = str_at(&v, "/error/message").unwrap_or("unknown error");
                return Err(t.error(kind, format!("error in stream: {message}")));
            }
            _ => {}
        }
        Ok(false)
    }

    /// `message_delta` usage is cumulative but may repeat only some counters (often just
    /// `output_tokens`): each counter present replaces the one from `message_start`, the
    /// others are kept.
    fn merge_usage(&mut self, u: &Value) {
        let field = |name: &str| u.get(name).and_then(Value::as_u64);
        let input = field("input_tokens");
        let read = field("cache_read_input_tokens");
        let created = field("cache_creation_input_tokens");
        if input.is_some() || read.is_some() || created.is_some() {
            self.input_parts = [
                input.unwrap_or(self.input_parts[0]),
                read.unwrap_or(self.input_parts[1]),
                created.unwrap_or(self.input_parts[2]),
            ];
            let [input, read, created] = self.input_parts;
            self.usage.input_tokens = input + read + created;
            self.usage.cached_input_tokens = read;
        }
        if let Some(output) = field("output_tokens") {
            self.usage.output_tokens = output;
        }
    }

    fn text(&mut self, text: &str, on_delta: &(dyn Fn(&str) + Send + Sync)) {
        if !text.is_empty() {
            self.content.push_str(text);
            on_delta(text);
        }
    }

    pub(crate) fn finish(self, fallback_model: &str) -> ModelResponse {
        let tool_calls: Vec<_> = self
            .calls
            .into_values()
            .map(|c| tool_call(&c.id, &c.name, c.arguments))
            .collect();
        ModelResponse {
            content: self.content,
            stop_reason: stop_reason(self.stop.as_deref(), !tool_calls.is_empty()),
            tool_calls,
            usage: self.usage,
            model: self.model.unwrap_or_else(|| fallback_model.to_owned()),
            served_by: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::ProviderSettings;
    use reef_core::StopReason;
    use std::sync::Mutex;

    #[test]
    fn events_assemble_text_tool_input_and_usage() {
        let t = Transport::new(ProviderSettings::default()).unwrap();
        let seen = Mutex::new(String::new());
        let on_delta = |d: &str| seen.lock().unwrap().push_str(d);
        let mut s = StreamState::default();
        let events = [
            r#"{"type":"message_start","message":{"model":"claude-t","usage":{"input_tokens":4,"cache_read_input_tokens":6,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_7","name":"ls","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"2}"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
        ];
        for e in events {
            assert!(!s.on_event(&t, None, e, &on_delta).unwrap());
        }
        assert!(
            s.on_event(&t, Some("message_stop"), "{}", &on_delta)
                .unwrap()
        );
        let r = s.finish("fallback");
        assert_eq!(seen.lock().unwrap().as_str(), "Hi");
        assert_eq!(r.model, "claude-t");
        assert_eq!(r.tool_calls[0].id.as_str(), "toolu_7");
        assert_eq!(r.tool_calls[0].arguments, r#"{"a":2}"#);
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!((r.usage.input_tokens, r.usage.cached_input_tokens), (10, 6));
        assert_eq!(r.usage.output_tokens, 9);
    }

    #[test]
    fn error_events_are_typed() {
        let t = Transport::new(ProviderSettings::default()).unwrap();
        let mut s = StreamState::default();
        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let err = s
            .on_event(&t, Some("error"), overloaded, &|_: &str| {})
            .unwrap_err();
        assert_eq!(err.kind, ModelErrorKind::Server);
        assert!(err.message.contains("Overloaded"));
        let bad = s
            .on_event(&t, Some("message_start"), "nope", &|_: &str| {})
            .unwrap_err();
        assert_eq!(bad.kind, ModelErrorKind::Malformed);
    }
}
