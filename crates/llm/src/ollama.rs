//! The Ollama client (`POST {base_url}/api/chat`): request mapping (tool arguments are JSON
//! objects on this wire, not text), plain JSON replies and NDJSON streams (one JSON object
//! per line, the last with `"done": true` and the token counts).

use crate::error::LlmError;
use crate::http::Transport;
use crate::retry::{error_excerpt, with_retries};
use crate::settings::ProviderSettings;
use crate::wire::{set_some, str_at, tool_call, u64_at};
use async_trait::async_trait;
use futures::StreamExt;
use reef_core::{
    Message, ModelClient, ModelError, ModelErrorKind, ModelRequest, ModelResponse, OnDelta,
    OnStream, StopReason, StreamEvent, ToolCall, Usage,
};
use serde_json::{Value, json};

const PATH: &str = "/api/chat";

/// A `ModelClient` for Ollama's native chat API.
#[derive(Debug)]
pub struct OllamaClient {
    transport: Transport,
}

impl OllamaClient {
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
        let t = &self.transport;
        let headers = self.transport.bearer_headers();
        let fallback = &t.settings.model;
        if !t.settings.stream {
            let reply = t.post_for_json(PATH, &headers, body).await?;
            let mut state = Lines::default();
            state.line(t, &reply, on_delta)?;
            if !state.done {
                return Err(t.error(ModelErrorKind::Malformed, "the reply is not marked done"));
            }
            return Ok(state.finish(fallback));
        }
        let response = t.open_stream(PATH, &headers, body).await?;
        let mut state = Lines::default();
        let mut stream = response.bytes_stream();
        let mut pending: Vec<u8> = Vec::new();
        loop {
            let next = tokio::time::timeout(t.settings.request_timeout, stream.next())
                .await
                .map_err(|_| t.timeout_error("stream stalled: no data"))?;
            match next {
                Some(Ok(chunk)) => pending.extend_from_slice(&chunk),
                Some(Err(e)) => return Err(t.reqwest_error(&e)),
                None => {
                    return Err(t.error(
                        ModelErrorKind::Malformed,
                        "the stream ended before its final (done) line",
                    ));
                }
            }
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let text = String::from_utf8_lossy(&line);
                if text.trim().is_empty() {
                    continue;
                }
                let value: Value = serde_json::from_str(text.trim()).map_err(|e| {
                    t.error(
                        ModelErrorKind::Malformed,
                        format!("invalid stream line ({e}): {}", error_excerpt(&text)),
                    )
                })?;
                state.line(t, &value, on_delta)?;
                if state.done {
                    return Ok(state.finish(fallback));
                }
            }
        }
    }
}

#[async_trait]
impl ModelClient for OllamaClient {
    fn provider(&self) -> &str {
        &self.transport.settings.name
    }

    fn model(&self) -> &str {
        &self.transport.settings.model
    }

    fn wire_api(&self) -> Option<reef_core::WireApi> {
        Some(reef_core::WireApi::Ollama)
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

/// The assembled reply, one JSON object (line) at a time.
#[derive(Default)]
struct Lines {
    content: String,
    calls: Vec<ToolCall>,
    model: Option<String>,
    usage: Usage,
    reason: Option<String>,
    done: bool,
}

impl Lines {
    fn line(&mut self, t: &Transport, v: &Value, on_delta: &OnDelta<'_>) -> Result<(), ModelError> {
        if let Some(error) = str_at(v, "/error") {
            return Err(t.error(ModelErrorKind::Server, error.to_owned()));
        }
        if let Some(model) = str_at(v, "/model") {
            self.model = Some(model.to_owned());
        }
        if let Some(text) = str_at(v, "/message/content")
            && !text.is_empty()
        {
            on_delta(text);
            self.content.push_str(text);
        }
        for call in v
            .pointer("/message/tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let arguments = match call.pointer("/function/arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            // Ollama sends no call ids: `tool_call` makes fresh ones.
            self.calls.push(tool_call(
                str_at(call, "/id").unwrap_or(""),
                str_at(call, "/function/name").unwrap_or(""),
                arguments,
            ));
        }
        if v.get("done").and_then(Value::as_bool) == Some(true) {
            self.done = true;
            self.usage = Usage {
                input_tokens: u64_at(v, "/prompt_eval_count"),
                output_tokens: u64_at(v, "/eval_count"),
                cached_input_tokens: 0,
            };
            self.reason = str_at(v, "/done_reason").map(str::to_owned);
        }
        Ok(())
    }

    fn finish(self, fallback_model: &str) -> ModelResponse {
        let stop_reason = match self.reason.as_deref() {
            _ if !self.calls.is_empty() => StopReason::ToolUse,
            Some("length") => StopReason::MaxTokens,
            Some("stop") | None => StopReason::EndTurn,
            Some(other) => StopReason::Other(other.to_owned()),
        };
        ModelResponse {
            content: self.content,
            tool_calls: self.calls,
            usage: self.usage,
            stop_reason,
            model: self.model.unwrap_or_else(|| fallback_model.to_owned()),
            served_by: None,
        }
    }
}

/// The JSON request body: messages with tool-call arguments as objects, tools as functions,
/// `options.num_ctx` (the configured window, so Ollama's context is the one reef tracks; its
/// own default is small) and `options.num_predict` when the request limits output.
pub(crate) fn request_body(settings: &ProviderSettings, request: &ModelRequest) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message_json).collect();
    let mut body = json!({
        "model": settings.model,
        "messages": messages,
        "stream": settings.stream,
    });
    body["options"] = json!({"num_ctx": settings.context_tokens});
    if let Some(max) = request.max_output_tokens {
        body["options"]["num_predict"] = json!(max);
    }
    // Ollama has no switch that forces a tool call: `tool_choice` is carried by the text.
    let s = &settings.sampling;
    let options = &mut body["options"];
    set_some(options, "temperature", s.temperature);
    set_some(options, "top_p", s.top_p);
    set_some(options, "top_k", s.top_k);
    set_some(options, "repeat_penalty", s.repeat_penalty);
    set_some(options, "seed", s.seed);
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
    }
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
            let mut m = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                m["tool_calls"] = tool_calls
                    .iter()
                    .map(|c| {
                        // Arguments the model wrote as invalid JSON go back as a string.
                        let arguments = serde_json::from_str::<Value>(&c.arguments)
                            .unwrap_or_else(|_| Value::String(c.arguments.clone()));
                        json!({"function": {"name": c.name, "arguments": arguments}})
                    })
                    .collect();
            }
            m
        }
        Message::Tool { name, content, .. } => {
            json!({"role": "tool", "tool_name": name, "content": content})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reef_core::{ToolCallId, ToolSpec};

    #[test]
    fn tool_arguments_go_out_as_objects_and_results_name_their_tool() {
        let request = ModelRequest {
            messages: vec![
                Message::user("list"),
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: ToolCallId::from("call_1"),
                        name: "list_dir".into(),
                        arguments: r#"{"path":"."}"#.into(),
                    }],
                },
                Message::Tool {
                    call_id: ToolCallId::from("call_1"),
                    name: "list_dir".into(),
                    content: "a.txt".into(),
                    is_error: false,
                },
            ],
            tools: vec![ToolSpec {
                name: "list_dir".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }],
            max_output_tokens: Some(64),
            ..Default::default()
        };
        let body = request_body(&ProviderSettings::default(), &request);
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["arguments"],
            json!({"path": "."})
        );
        assert_eq!(body["messages"][2]["tool_name"], "list_dir");
        assert_eq!(body["options"]["num_predict"], 64);
        assert_eq!(body["options"]["num_ctx"], 8192);
        assert_eq!(body["tools"][0]["function"]["name"], "list_dir");
        assert!(body["options"].get("temperature").is_none());
        let settings = ProviderSettings {
            sampling: reef_core::Sampling {
                temperature: Some(0.7),
                repeat_penalty: Some(1.1),
                seed: Some(3),
                ..Default::default()
            },
            ..ProviderSettings::default()
        };
        let body = request_body(&settings, &request);
        assert_eq!(body["options"]["seed"], 3);
        assert_eq!(body["options"]["repeat_penalty"], json!(1.1_f32));
        assert_eq!(body["options"]["temperature"], json!(0.7_f32));
    }
}
