//! OpenAI chat-completions streaming: assembles a reply from `chat.completion.chunk` events
//! (text deltas, tool-call fragments per index, `finish_reason`, the final usage chunk).

use crate::http::Transport;
use crate::openai::{stop_reason, usage};
use crate::wire::{str_at, tool_call};
use reef_core::{ModelError, ModelErrorKind, ModelResponse, OnDelta, Usage};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// What a stream has delivered so far.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    content: String,
    calls: BTreeMap<u64, PartialCall>,
    usage: Option<Usage>,
    finish: Option<String>,
    model: Option<String>,
    /// The call the latest tool-call delta went to.
    last_index: Option<u64>,
}

impl StreamState {
    /// Handles one `data:` payload; returns true at `[DONE]`.
    pub(crate) fn on_data(
        &mut self,
        t: &Transport,
        data: &str,
        on_delta: &OnDelta<'_>,
    ) -> Result<bool, ModelError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            t.error(
                ModelErrorKind::Malformed,
                format!(
                    "invalid stream chunk ({e}): {}",
                    crate::retry::truncate(data, 200)
                ),
            )
        })?;
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = str_at(err, "/message").map_or_else(|| err.to_string(), str::to_owned);
            return Err(t.error(
                ModelErrorKind::Server,
                format!("error in stream: {message}"),
            ));
        }
        if let Some(model) = str_at(&chunk, "/model").filter(|m| !m.is_empty()) {
            self.model = Some(model.to_owned());
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage(u));
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            if let Some(text) = str_at(choice, "/delta/content").filter(|s| !s.is_empty()) {
                self.content.push_str(text);
                on_delta(text);
            }
            let deltas = choice
                .pointer("/delta/tool_calls")
                .and_then(Value::as_array);
            for delta in deltas.into_iter().flatten() {
                let index = self.call_index(delta);
                let call = self.calls.entry(index).or_default();
                if let Some(id) = str_at(delta, "/id").filter(|s| !s.is_empty()) {
                    call.id = id.to_owned();
                }
                if let Some(name) = str_at(delta, "/function/name")
                    && call.name.is_empty()
                {
                    call.name = name.to_owned();
                }
                if let Some(args) = str_at(delta, "/function/arguments") {
                    call.arguments.push_str(args);
                }
            }
            if let Some(finish) = str_at(choice, "/finish_reason") {
                self.finish = Some(finish.to_owned());
            }
        }
        Ok(false)
    }

    /// Which call a tool-call delta belongs to: its `index` when the server sends one. Some
    /// OpenAI-compatible servers omit it; then a delta with a new id starts a new call and a
    /// delta without an id continues the latest one.
    fn call_index(&mut self, delta: &Value) -> u64 {
        if let Some(index) = delta.get("index").and_then(Value::as_u64) {
            self.last_index = Some(index);
            return index;
        }
        let id = str_at(delta, "/id").filter(|s| !s.is_empty());
        let index = match (id, self.last_index) {
            (Some(id), _) => match self.calls.iter().find(|(_, c)| c.id == id) {
                Some((index, _)) => *index,
                None => self.calls.keys().next_back().map_or(0, |last| last + 1),
            },
            (None, Some(last)) => last,
            (None, None) => 0,
        };
        self.last_index = Some(index);
        index
    }

    pub(crate) fn finish(self, fallback_model: &str) -> ModelResponse {
        let tool_calls: Vec<_> = self
            .calls
            .into_values()
            .map(|c| tool_call(&c.id, &c.name, c.arguments))
            .collect();
        ModelResponse {
            content: self.content,
            stop_reason: stop_reason(self.finish.as_deref(), !tool_calls.is_empty()),
            tool_calls,
            usage: self.usage.unwrap_or_default(),
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
    fn stream_state_accumulates_fragments_per_index() {
        let t = Transport::new(ProviderSettings::default()).unwrap();
        let seen = Mutex::new(Vec::new());
        let on_delta = |d: &str| seen.lock().unwrap().push(d.to_owned());
        let mut s = StreamState::default();
        let chunks = [
            r#"{"model":"m1","choices":[{"index":0,"delta":{"content":"Hi"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"two","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"one","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
        ];
        for c in chunks {
            assert!(!s.on_data(&t, c, &on_delta).unwrap());
        }
        assert!(s.on_data(&t, "[DONE]", &on_delta).unwrap());
        let r = s.finish("fallback");
        assert_eq!(seen.lock().unwrap().as_slice(), ["Hi"]);
        assert_eq!(r.model, "m1");
        assert_eq!(r.tool_calls[0].arguments, r#"{"x":1}"#);
        assert_eq!(r.tool_calls[1].name, "two");
        assert_eq!(r.tool_calls[1].arguments, "{}");
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.usage.input_tokens, 5);
    }
}
