//! What the mock server received: one `RecordedRequest` per HTTP request, with wire-aware helpers.

use reef_core::WireApi;
use serde_json::Value;

/// One request as the mock server received it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// The request path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header names are lowercase; values that are not UTF-8 are converted lossily.
    pub headers: Vec<(String, String)>,
    /// The JSON body; `Null` when empty, a JSON string holding the raw text when not JSON.
    pub body: Value,
}

impl RecordedRequest {
    /// The wire API, from the path: `…/messages` is Anthropic, anything else OpenAI chat.
    pub fn wire(&self) -> WireApi {
        if self.path.ends_with("/messages") {
            WireApi::Anthropic
        } else if self.path.ends_with("/api/chat") {
            WireApi::Ollama
        } else {
            WireApi::OpenaiChat
        }
    }

    /// The first value of a header (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the request asked for a streamed reply (`"stream": true`).
    pub fn is_stream(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }

    /// The `messages` array (empty when absent).
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Contents of tool-result messages, in order: OpenAI `role: tool` messages, or Anthropic
    /// `tool_result` blocks inside user messages (string content or text blocks).
    pub fn tool_results(&self) -> Vec<String> {
        let mut out = Vec::new();
        for m in self.messages() {
            let role = m.get("role").and_then(Value::as_str);
            match self.wire() {
                WireApi::OpenaiChat | WireApi::Ollama if role == Some("tool") => {
                    out.push(text_of(m.get("content")));
                }
                WireApi::Anthropic if role == Some("user") => {
                    for block in blocks(m) {
                        if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                            out.push(text_of(block.get("content")));
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Tool-use ids that tool results in this request answer, in order.
    pub fn tool_result_ids(&self) -> Vec<String> {
        let mut out = Vec::new();
        for m in self.messages() {
            if let Some(id) = m.get("tool_call_id").and_then(Value::as_str) {
                out.push(id.to_owned());
            }
            for block in blocks(m) {
                if let Some(id) = block.get("tool_use_id").and_then(Value::as_str) {
                    out.push(id.to_owned());
                }
            }
        }
        out
    }

    /// The text of the last user message that has text (tool-result-only messages are skipped).
    pub fn last_user_text(&self) -> Option<String> {
        self.messages()
            .iter()
            .rev()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .find_map(|m| {
                let text = match m.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(parts)) => joined_text_parts(parts),
                    _ => String::new(),
                };
                (!text.is_empty()).then_some(text)
            })
    }

    /// Names of the tools offered (`tools[].function.name` or `tools[].name`).
    pub fn tool_names(&self) -> Vec<String> {
        let Some(tools) = self.body.get("tools").and_then(Value::as_array) else {
            return Vec::new();
        };
        tools
            .iter()
            .filter_map(|t| {
                t.pointer("/function/name")
                    .or_else(|| t.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The system prompt: OpenAI's `role: system` messages or Anthropic's top-level `system`.
    pub fn system_text(&self) -> String {
        let mut out = match self.body.get("system") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => joined_text_parts(parts),
            _ => String::new(),
        };
        for m in self.messages() {
            if m.get("role").and_then(Value::as_str) == Some("system") {
                out.push_str(&text_of(m.get("content")));
            }
        }
        out
    }

    /// The daemon agent this request is for: the name its system prompt gives
    /// (``You are `NAME` ``), or an empty string.
    pub fn agent(&self) -> String {
        let system = self.system_text();
        let start = system.find("You are `").map_or(0, |i| i + 9);
        system[start..].split('`').next().unwrap_or("").to_owned()
    }

    /// Whether the conversation ends with a tool result (the model is being shown the
    /// outcome of its calls) rather than with new input.
    pub fn ends_with_tool_result(&self) -> bool {
        let Some(last) = self.messages().last() else {
            return false;
        };
        last.get("role").and_then(Value::as_str) == Some("tool")
            || blocks(last)
                .iter()
                .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
    }

    /// The prompt size the mock reports for this request (`usage.input_tokens`): a quarter of
    /// its JSON body's bytes. Tests hold reef's context limits against this figure.
    pub fn prompt_tokens(&self) -> u64 {
        serde_json::to_vec(&self.body).map_or(0, |b| b.len() as u64 / 4)
    }

    /// The number of entries in `messages` (Anthropic's top-level `system` is not counted).
    pub fn message_count(&self) -> usize {
        self.messages().len()
    }
}

fn blocks(message: &Value) -> &[Value] {
    message
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Text of a content value: a string, or the text parts of an array of blocks.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => joined_text_parts(parts),
        _ => String::new(),
    }
}

fn joined_text_parts(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(path: &str, body: Value) -> RecordedRequest {
        RecordedRequest {
            path: path.into(),
            headers: vec![("authorization".into(), "Bearer k".into())],
            body,
        }
    }

    #[test]
    fn openai_helpers_read_messages_and_tools() {
        let r = req(
            "/v1/chat/completions",
            json!({
                "stream": true,
                "tools": [{"type": "function", "function": {"name": "shell"}}],
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": null, "tool_calls": []},
                    {"role": "tool", "tool_call_id": "c1", "content": "out"}
                ]
            }),
        );
        assert_eq!(r.wire(), WireApi::OpenaiChat);
        assert!(r.is_stream());
        assert_eq!(r.header("Authorization"), Some("Bearer k"));
        assert_eq!(r.tool_results(), ["out"]);
        assert_eq!(r.tool_result_ids(), ["c1"]);
        assert_eq!(r.last_user_text().as_deref(), Some("hi"));
        assert_eq!(r.tool_names(), ["shell"]);
        assert_eq!(r.message_count(), 3);
    }

    #[test]
    fn anthropic_helpers_read_blocks() {
        let r = req(
            "/v1/messages",
            json!({
                "tools": [{"name": "read_file", "input_schema": {}}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "hello"}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
                        {"type": "tool_result", "tool_use_id": "toolu_2",
                         "content": [{"type": "text", "text": "b"}]}
                    ]}
                ]
            }),
        );
        assert_eq!(r.wire(), WireApi::Anthropic);
        assert!(!r.is_stream());
        assert_eq!(r.tool_results(), ["a", "b"]);
        assert_eq!(r.tool_result_ids(), ["toolu_1", "toolu_2"]);
        assert_eq!(r.last_user_text().as_deref(), Some("hello"));
        assert_eq!(r.tool_names(), ["read_file"]);
    }
}
