//! The Anthropic Messages client (`POST {base_url}/messages`): request mapping (top-level
//! system, tool_use / tool_result blocks), plain JSON replies and SSE event streams.

use crate::anthropic_stream::StreamState;
use crate::error::LlmError;
use crate::http::{Assemble, Transport};
use crate::retry::{truncate, with_retries};
use crate::settings::ProviderSettings;
use crate::sse::SseEvent;
use crate::wire::{set_some, str_at, tool_call, u64_at};
use async_trait::async_trait;
use reef_core::{
    Message, ModelClient, ModelError, ModelErrorKind, ModelRequest, ModelResponse, StopReason,
    ToolChoice, Usage,
};
use reef_core::{OnDelta, OnStream, StreamEvent};
use serde_json::{Value, json};

const PATH: &str = "/messages";
const API_VERSION: &str = "2023-06-01";

/// A `ModelClient` for the Anthropic Messages API.
#[derive(Debug)]
pub struct AnthropicClient {
    transport: Transport,
}

impl AnthropicClient {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        Ok(Self {
            transport: Transport::new(settings)?,
        })
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", API_VERSION.to_owned())];
        if let Some(key) = &self.transport.settings.api_key {
            headers.push(("x-api-key", key.clone()));
        }
        headers
    }

    async fn attempt(
        &self,
        body: &Value,
        on_delta: &OnDelta<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let headers = self.headers();
        self.transport
            .exchange::<StreamState>(PATH, &headers, body, on_delta)
            .await
    }
}

impl Assemble for StreamState {
    fn event(
        &mut self,
        t: &Transport,
        event: &SseEvent,
        on_delta: &OnDelta<'_>,
    ) -> Result<bool, ModelError> {
        self.on_event(t, event.event.as_deref(), &event.data, on_delta)
    }

    fn finish(self, fallback_model: &str) -> ModelResponse {
        StreamState::finish(self, fallback_model)
    }

    fn whole(
        t: &Transport,
        reply: &Value,
        fallback_model: &str,
        on_delta: &OnDelta<'_>,
    ) -> Result<ModelResponse, ModelError> {
        whole_reply(t, reply, fallback_model, on_delta)
    }
}

#[async_trait]
impl ModelClient for AnthropicClient {
    fn provider(&self) -> &str {
        &self.transport.settings.name
    }

    fn model(&self) -> &str {
        &self.transport.settings.model
    }

    fn wire_api(&self) -> Option<reef_core::WireApi> {
        Some(reef_core::WireApi::Anthropic)
    }

    fn context_tokens(&self) -> Option<u32> {
        Some(self.transport.settings.context_tokens)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        on_event: &OnStream<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let body = request_body(&self.transport.settings, request);
        let on_text = |text: &str| on_event(StreamEvent::Text(text));
        with_retries(&self.transport.settings, on_event, || {
            self.attempt(&body, &on_text)
        })
        .await
    }
}

/// The JSON request body: system messages go to the top-level `system` field, consecutive
/// messages of the same role (e.g. several tool results) are merged into one message.
pub(crate) fn request_body(settings: &ProviderSettings, request: &ModelRequest) -> Value {
    let mut system = Vec::new();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = match message {
            Message::System { content } => {
                system.push(content.as_str());
                continue;
            }
            Message::User { content } => ("user", text_block(content)),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = text_block(content);
                blocks.extend(tool_calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.id, "name": c.name,
                           "input": arguments_object(&c.arguments)})
                }));
                ("assistant", blocks)
            }
            Message::Tool {
                call_id,
                content,
                is_error,
                ..
            } => (
                "user",
                vec![json!({"type": "tool_result", "tool_use_id": call_id,
                            "content": content, "is_error": is_error})],
            ),
        };
        match turns.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ if blocks.is_empty() => {}
            _ => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = json!({
        "model": settings.model,
        "max_tokens": request.max_output_tokens.unwrap_or(settings.max_output_tokens),
        "messages": messages,
        "stream": settings.stream,
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description,
                            "input_schema": t.parameters})
            })
            .collect();
        let kind = match request.tool_choice {
            ToolChoice::Auto => "auto",
            ToolChoice::Required => "any",
        };
        if request.tool_choice == ToolChoice::Required || request.one_call {
            body["tool_choice"] = json!({"type": kind});
        }
        if request.one_call {
            body["tool_choice"]["disable_parallel_tool_use"] = json!(true);
        }
    }
    // Anthropic has no seed or repeat penalty (config refuses them for this wire).
    let s = &settings.sampling;
    set_some(&mut body, "temperature", s.temperature);
    set_some(&mut body, "top_p", s.top_p);
    set_some(&mut body, "top_k", s.top_k);
    body
}

/// A text block, or nothing for empty text (Anthropic rejects empty text blocks).
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

/// `tool_use.input` must be an object: empty arguments are `{}`, and text that is not a JSON
/// object is passed as `{"_raw": text}` so the model can see what it sent.
fn arguments_object(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"_raw": arguments}),
    }
}

/// `tool_use.input` back to arguments text (a string input is taken verbatim).
pub(crate) fn input_arguments(input: Option<&Value>) -> String {
    match input {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

pub(crate) fn stop_reason(reason: Option<&str>, has_calls: bool) -> StopReason {
    match reason {
        Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some(other) => StopReason::Other(other.to_owned()),
        None if has_calls => StopReason::ToolUse,
        None => StopReason::EndTurn,
    }
}

/// Anthropic counts cached input separately; reef's `input_tokens` includes it.
pub(crate) fn input_usage(usage: &Value, into: &mut Usage) {
    let cached = u64_at(usage, "/cache_read_input_tokens");
    into.input_tokens =
        u64_at(usage, "/input_tokens") + cached + u64_at(usage, "/cache_creation_input_tokens");
    into.cached_input_tokens = cached;
}

fn whole_reply(
    t: &Transport,
    reply: &Value,
    fallback_model: &str,
    on_delta: &OnDelta<'_>,
) -> Result<ModelResponse, ModelError> {
    let response =
        parse_response(reply, fallback_model).map_err(|m| t.error(ModelErrorKind::Malformed, m))?;
    if !response.content.is_empty() {
        on_delta(&response.content);
    }
    Ok(response)
}

/// Parses a Messages reply object.
pub(crate) fn parse_response(reply: &Value, fallback_model: &str) -> Result<ModelResponse, String> {
    let blocks = reply
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            format!(
                "reply has no content: {}",
                truncate(&reply.to_string(), 200)
            )
        })?;
    let mut content = String::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match str_at(block, "/type") {
            Some("text") => content.push_str(str_at(block, "/text").unwrap_or("")),
            Some("tool_use") => tool_calls.push(tool_call(
                str_at(block, "/id").unwrap_or(""),
                str_at(block, "/name").unwrap_or(""),
                input_arguments(block.get("input")),
            )),
            _ => {}
        }
    }
    let mut usage = Usage::default();
    if let Some(u) = reply.get("usage") {
        input_usage(u, &mut usage);
        usage.output_tokens = u64_at(u, "/output_tokens");
    }
    Ok(ModelResponse {
        content,
        stop_reason: stop_reason(str_at(reply, "/stop_reason"), !tool_calls.is_empty()),
        tool_calls,
        usage,
        model: str_at(reply, "/model").unwrap_or(fallback_model).to_owned(),
        served_by: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reef_core::{ToolCall, ToolCallId};

    fn tool_msg(id: &str, content: &str, is_error: bool) -> Message {
        Message::Tool {
            call_id: ToolCallId::from(id),
            name: "t".into(),
            content: content.into(),
            is_error,
        }
    }

    #[test]
    fn request_merges_tool_results_and_lifts_system() {
        let request = ModelRequest {
            messages: vec![
                Message::system("be brief"),
                Message::user("go"),
                Message::Assistant {
                    content: "calling".into(),
                    tool_calls: vec![
                        ToolCall {
                            id: ToolCallId::from("toolu_1"),
                            name: "a".into(),
                            arguments: r#"{"x":1}"#.into(),
                        },
                        ToolCall {
                            id: ToolCallId::from("toolu_2"),
                            name: "b".into(),
                            arguments: "{oops".into(),
                        },
                    ],
                },
                tool_msg("toolu_1", "one", false),
                tool_msg("toolu_2", "two", true),
            ],
            tools: Vec::new(),
            max_output_tokens: None,
            ..Default::default()
        };
        let body = request_body(&ProviderSettings::default(), &request);
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["max_tokens"], 4096);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["content"][1]["input"]["x"], 1);
        assert_eq!(messages[1]["content"][2]["input"]["_raw"], "{oops");
        let results = messages[2]["content"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(results[1]["tool_use_id"], "toolu_2");
        assert_eq!(results[1]["is_error"], true);
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn sampling_and_a_required_call_are_sent() {
        let settings = ProviderSettings {
            sampling: reef_core::Sampling {
                temperature: Some(0.5),
                top_k: Some(20),
                ..Default::default()
            },
            ..ProviderSettings::default()
        };
        let mut request = ModelRequest {
            messages: vec![Message::user("go")],
            tools: vec![reef_core::ToolSpec {
                name: "a".into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            }],
            tool_choice: ToolChoice::Required,
            ..Default::default()
        };
        let body = request_body(&settings, &request);
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["top_k"], 20);
        assert!(body.get("top_p").is_none() && body.get("seed").is_none());
        request.tool_choice = ToolChoice::Auto;
        let body = request_body(&ProviderSettings::default(), &request);
        assert!(body.get("tool_choice").is_none() && body.get("temperature").is_none());
        request.one_call = true;
        let body = request_body(&ProviderSettings::default(), &request);
        assert_eq!(
            body["tool_choice"],
            json!({"type": "auto", "disable_parallel_tool_use": true})
        );
    }

    #[test]
    fn parse_counts_cached_input() {
        let reply = json!({"model": "c", "stop_reason": "max_tokens",
            "content": [{"type": "text", "text": "hi"}],
            "usage": {"input_tokens": 10, "output_tokens": 3, "cache_read_input_tokens": 90}});
        let r = parse_response(&reply, "x").unwrap();
        assert_eq!(r.usage.input_tokens, 100);
        assert_eq!(r.usage.cached_input_tokens, 90);
        assert_eq!(r.stop_reason, StopReason::MaxTokens);
        assert!(parse_response(&json!({"type": "error"}), "x").is_err());
    }
}
