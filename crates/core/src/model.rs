//! The model boundary: a provider-neutral request/response, typed errors that say whether a
//! retry can help, and the `ModelClient` trait implemented by each wire API.

use crate::message::Message;
use crate::tool::{ToolCall, ToolSpec};
use crate::usage::Usage;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The wire protocol a provider speaks. Providers are data: a base URL plus one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WireApi {
    /// OpenAI chat completions (`/chat/completions`): OpenAI, vLLM, llama.cpp, LM Studio, OpenRouter.
    OpenaiChat,
    /// Anthropic Messages (`/messages`).
    Anthropic,
    /// Ollama's native chat API (`/api/chat`, NDJSON streaming).
    Ollama,
    /// A GGUF model run in-process (the embedded local model); no network.
    Local,
}

impl WireApi {
    pub const ALL: [WireApi; 4] = [
        WireApi::OpenaiChat,
        WireApi::Anthropic,
        WireApi::Ollama,
        WireApi::Local,
    ];

    /// The wires spoken over HTTP to a provider's server.
    pub const HTTP: [WireApi; 3] = [WireApi::OpenaiChat, WireApi::Anthropic, WireApi::Ollama];

    pub fn as_str(self) -> &'static str {
        match self {
            WireApi::OpenaiChat => "openai-chat",
            WireApi::Anthropic => "anthropic",
            WireApi::Ollama => "ollama",
            WireApi::Local => "local",
        }
    }

    pub fn parse(s: &str) -> Option<WireApi> {
        WireApi::ALL.into_iter().find(|w| w.as_str() == s)
    }
}

impl fmt::Display for WireApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request to a model: the whole context and the tools it may call.
#[derive(Clone, Debug, Default)]
pub struct ModelRequest {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_output_tokens: Option<u32>,
    /// Whether the reply may be text or must call a tool (ignored without tools).
    pub tool_choice: ToolChoice,
    /// At most one tool call per reply (OpenAI `parallel_tool_calls: false`, Anthropic
    /// `disable_parallel_tool_use`, the embedded model's grammar); small models otherwise
    /// repeat a call several times in one reply.
    pub one_call: bool,
}

/// Whether a reply may be plain text or must call one of the offered tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model chooses between an answer and calls.
    #[default]
    Auto,
    /// The reply must call at least one tool (OpenAI `"required"`, Anthropic `any`, a grammar
    /// for the embedded model; Ollama has no such switch and is only asked in the text).
    Required,
}

/// How the next token is chosen, per provider (`[providers.NAME]` `temperature`, `top_p`,
/// `top_k`, `repeat_penalty`, `seed`). Unset fields keep the provider's own default; the
/// embedded model samples greedily unless `temperature` is above 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<u32>,
    pub repeat_penalty: Option<f32>,
    pub seed: Option<u64>,
}

/// Why the model stopped producing output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    Other(String),
}

/// A complete model reply, assembled from a stream or a single body.
#[derive(Clone, Debug)]
pub struct ModelResponse {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub stop_reason: StopReason,
    /// The model name the provider reported serving (may differ from the one requested).
    pub model: String,
    /// The configured provider that served the request, when it is not the client's own
    /// `provider()` (a failover chain names the member that answered).
    pub served_by: Option<String>,
}

/// Classes of model failure; `is_retryable` decides between retry/failover and giving up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelErrorKind {
    /// 429: back off (honouring Retry-After) and retry.
    RateLimited,
    /// 5xx: retry.
    Server,
    /// Could not connect, or the connection broke: retry.
    Connection,
    /// No answer in time: retry.
    Timeout,
    /// The reply could not be parsed (malformed JSON, a stream cut mid-way): retry.
    Malformed,
    /// 401/403: fix the API key or permissions; never retried.
    Auth,
    /// 400: the request itself is wrong; never retried.
    BadRequest,
    /// 404: wrong base URL or model name; never retried.
    NotFound,
    /// The context is longer than the model accepts; the agent must shrink it.
    ContextLength,
    /// The turn was cancelled by the user.
    Cancelled,
}

impl ModelErrorKind {
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ModelErrorKind::RateLimited
                | ModelErrorKind::Server
                | ModelErrorKind::Connection
                | ModelErrorKind::Timeout
                | ModelErrorKind::Malformed
        )
    }

    /// A short hint telling the operator how to recover.
    pub fn hint(self) -> &'static str {
        match self {
            ModelErrorKind::RateLimited => {
                "rate limited; retry later or configure a backup provider"
            }
            ModelErrorKind::Server => "the provider failed; retry later",
            ModelErrorKind::Connection => "check that the provider's base_url is reachable",
            ModelErrorKind::Timeout => "the provider did not answer in time",
            ModelErrorKind::Malformed => "the provider sent a reply reef could not parse",
            ModelErrorKind::Auth => "check the API key (api_key_env or REEF_API_KEY)",
            ModelErrorKind::BadRequest => "the provider rejected the request",
            ModelErrorKind::NotFound => "check base_url and the model name",
            ModelErrorKind::ContextLength => "the conversation is too long for this model",
            ModelErrorKind::Cancelled => "cancelled",
        }
    }
}

/// A failed model request, naming the provider and, for HTTP errors, the status.
#[derive(Clone, Debug, thiserror::Error)]
pub struct ModelError {
    pub provider: String,
    pub kind: ModelErrorKind,
    pub status: Option<u16>,
    pub message: String,
    /// Seconds the provider asked us to wait (Retry-After), if any.
    pub retry_after_secs: Option<u64>,
}

impl ModelError {
    pub fn new(
        provider: impl Into<String>,
        kind: ModelErrorKind,
        message: impl Into<String>,
    ) -> Self {
        Self {
            provider: provider.into(),
            kind,
            status: None,
            message: message.into(),
            retry_after_secs: None,
        }
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "provider `{}`", self.provider)?;
        if let Some(status) = self.status {
            write!(f, ": HTTP {status}")?;
        }
        write!(f, ": {} ({})", self.message, self.kind.hint())
    }
}

/// What a model client reports while a request is in flight.
#[derive(Clone, Copy, Debug)]
pub enum StreamEvent<'a> {
    /// A piece of the reply's text, as it arrives.
    Text(&'a str),
    /// The attempt failed with a retryable error and the request is sent again: text reported
    /// since the previous `Retrying` (or the start) belonged to the failed attempt and must be
    /// discarded by anyone assembling it.
    Retrying { attempt: u32, error: &'a ModelError },
}

/// Receives `StreamEvent`s (see `OnDelta` for why this is an alias).
pub type OnStream<'a> = dyn Fn(StreamEvent<'_>) + Send + Sync + 'a;

/// Receives streamed text as it arrives. An alias (rather than the bare type in the trait) keeps
/// the `&str` higher-ranked: `#[async_trait]` would otherwise pin it to one lifetime, and an
/// implementation could not pass a delta it has just received.
pub type OnDelta<'a> = dyn Fn(&str) + Send + Sync + 'a;

/// A model behind some wire API. One implementation per `WireApi`, plus mocks in tests.
#[async_trait]
pub trait ModelClient: Send + Sync {
    /// The configured provider name (the key under `[providers.*]`).
    fn provider(&self) -> &str;

    /// The model name requested from the provider.
    fn model(&self) -> &str;

    /// The context window in tokens (prompt plus reply), when known; a session compacts its
    /// history to stay inside it.
    fn context_tokens(&self) -> Option<u32> {
        None
    }

    /// The wire API the client speaks, when it is one (a failover chain reports its first
    /// member's); a session picks its profile for small local models from it.
    fn wire_api(&self) -> Option<WireApi> {
        None
    }

    /// Exactly how many tokens `request` takes as a prompt, for a client that can count them
    /// (the embedded model, with its own tokenizer and chat template); `None` makes the
    /// session estimate from the usage the provider reports.
    async fn count_tokens(&self, _request: &ModelRequest) -> Option<u64> {
        None
    }

    /// Sends one request. Streamed text and retries are reported to `on_event` as they happen;
    /// the assembled reply is returned at the end. Retries on retryable errors happen inside.
    async fn complete(
        &self,
        request: &ModelRequest,
        on_event: &OnStream<'_>,
    ) -> Result<ModelResponse, ModelError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_api_names_are_stable() {
        for w in WireApi::ALL {
            assert_eq!(WireApi::parse(w.as_str()), Some(w));
            let json = serde_json::to_string(&w).unwrap();
            assert_eq!(json, format!("\"{}\"", w.as_str()));
        }
        assert_eq!(WireApi::parse("openai"), None);
    }

    #[test]
    fn errors_name_provider_and_status() {
        let e = ModelError::new("main", ModelErrorKind::Auth, "invalid api key").with_status(401);
        let text = e.to_string();
        assert!(text.contains("`main`") && text.contains("401"), "{text}");
        assert!(!e.is_retryable());
        assert!(ModelError::new("m", ModelErrorKind::Server, "x").is_retryable());
    }
}
