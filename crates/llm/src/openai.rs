//! The OpenAI chat-completions client (`POST {base_url}/chat/completions`): request mapping,
//! plain JSON replies and SSE streams (text deltas, tool-call fragments per index, usage).

use crate::error::LlmError;
use crate::http::{Assemble, Transport};
use crate::openai_stream::StreamState;
use crate::retry::with_retries;
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

const PATH: &str = "/chat/completions";

/// A `ModelClient` for OpenAI-compatible chat completions.
#[derive(Debug)]
pub struct OpenAiClient {
    transport: Transport,
}

impl OpenAiClient {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        Ok(Self {
            transport: Transport::new(settings)?,
        })
    }

    async fn attempt(
        &self,
        body: &Value,
        on_delta: &OnDelta<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let headers = self.transport.bearer_headers();
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
        self.on_data(t, &event.data, on_delta)
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
impl ModelClient for OpenAiClient {
    fn provider(&self) -> &str {
        &self.transport.settings.name
    }

    fn model(&self) -> &str {
        &self.transport.settings.model
    }

    fn wire_api(&self) -> Option<reef_core::WireApi> {
        Some(reef_core::WireApi::OpenaiChat)
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

/// The JSON request body. `max_tokens` is sent only when the request sets a limit.
pub(crate) fn request_body(settings: &ProviderSettings, request: &ModelRequest) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message_json).collect();
    let mut body = json!({
        "model": settings.model,
        "messages": messages,
        "stream": settings.stream,
    });
    if settings.stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    if let Some(max) = request.max_output_tokens {
        body["max_tokens"] = json!(max);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        if request.tool_choice == ToolChoice::Required {
            body["tool_choice"] = json!("required");
        }
        if request.one_call {
            body["parallel_tool_calls"] = json!(false);
        }
    }
    // `top_k` and `repeat_penalty` are extensions of OpenAI-compatible servers (llama.cpp,
    // vLLM); they are sent only when configured.
    let s = &settings.sampling;
    set_some(&mut body, "temperature", s.temperature);
    set_some(&mut body, "top_p", s.top_p);
    set_some(&mut body, "top_k", s.top_k);
    set_some(&mut body, "repeat_penalty", s.repeat_penalty);
    set_some(&mut body, "seed", s.seed);
    body
}

fn message_json(message: &Message) -> Value {
    match message {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            if tool_calls.is_empty() {
                return json!({"role": "assistant", "content": content});
            }
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments}})
                })
                .collect();
            let content = if content.is_empty() {
                Value::Null
            } else {
                json!(content)
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Message::Tool {
            call_id, content, ..
        } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
    }
}

pub(crate) fn stop_reason(finish: Option<&str>, has_calls: bool) -> StopReason {
    match finish {
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some(other) => StopReason::Other(other.to_owned()),
        None if has_calls => StopReason::ToolUse,
        None => StopReason::EndTurn,
    }
}

pub(crate) fn usage(v: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(v, "/prompt_tokens"),
        output_tokens: u64_at(v, "/completion_tokens"),
        cached_input_tokens: u64_at(v, "/prompt_tokens_details/cached_tokens"),
    }
}

fn text_content(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// A non-streamed reply; its whole text is passed to `on_delta` once.
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

/// Parses a chat-completion object.
pub(crate) fn parse_response(reply: &Value, fallback_model: &str) -> Result<ModelResponse, String> {
    let choice = reply.pointer("/choices/0").ok_or_else(|| {
        format!(
            "reply has no choices: {}",
            crate::retry::truncate(&reply.to_string(), 200)
        )
    })?;
    let message = choice.get("message").unwrap_or(&Value::Null);
    let mut tool_calls = Vec::new();
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let arguments = match call.pointer("/function/arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        tool_calls.push(tool_call(
            str_at(call, "/id").unwrap_or(""),
            str_at(call, "/function/name").unwrap_or(""),
            arguments,
        ));
    }
    Ok(ModelResponse {
        content: text_content(message.get("content")),
        stop_reason: stop_reason(str_at(choice, "/finish_reason"), !tool_calls.is_empty()),
        tool_calls,
        usage: reply.get("usage").map(usage).unwrap_or_default(),
        model: str_at(reply, "/model").unwrap_or(fallback_model).to_owned(),
        served_by: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reef_core::{ToolCall, ToolCallId, ToolSpec};

    #[test]
    fn request_maps_messages_tools_and_stream_options() {
        let request = ModelRequest {
            messages: vec![
                Message::system("sys"),
                Message::user("hi"),
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: ToolCallId::from("c1"),
                        name: "ls".into(),
                        arguments: "{}".into(),
                    }],
                },
                Message::Tool {
                    call_id: ToolCallId::from("c1"),
                    name: "ls".into(),
                    content: "a.txt".into(),
                    is_error: false,
                },
            ],
            tools: vec![ToolSpec {
                name: "ls".into(),
                description: "list".into(),
                parameters: json!({"type": "object"}),
            }],
            max_output_tokens: Some(99),
            ..Default::default()
        };
        let body = request_body(&ProviderSettings::default(), &request);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["max_tokens"], 99);
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(body["messages"][3]["tool_call_id"], "c1");
        assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
        assert!(body.get("tool_choice").is_none() && body.get("temperature").is_none());

        let settings = ProviderSettings {
            sampling: reef_core::Sampling {
                temperature: Some(0.2),
                top_p: Some(0.9),
                seed: Some(7),
                ..Default::default()
            },
            ..ProviderSettings::default()
        };
        let required = ModelRequest {
            tool_choice: reef_core::ToolChoice::Required,
            one_call: true,
            ..request
        };
        let body = request_body(&settings, &required);
        assert_eq!(body["tool_choice"], "required");
        assert_eq!(body["parallel_tool_calls"], false);
        assert_eq!(body["seed"], 7);
        assert_eq!(body["top_p"], json!(0.9_f32));
        assert!(body.get("top_k").is_none() && body.get("repeat_penalty").is_none());
    }
}
