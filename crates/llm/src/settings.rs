//! `ProviderSettings`: everything a model client needs to know about one configured provider.

use reef_core::{Sampling, WireApi};
use std::fmt;
use std::time::Duration;

/// One provider as configured (`[providers.NAME]`), resolved to concrete values.
#[derive(Clone)]
pub struct ProviderSettings {
    /// The config key, e.g. "main"; named in every error.
    pub name: String,
    pub wire_api: WireApi,
    /// e.g. `https://api.openai.com/v1`; requests go to `{base_url}/chat/completions` or
    /// `{base_url}/messages` (a trailing `/` is ignored).
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// Stream replies over SSE (default true).
    pub stream: bool,
    /// Extra attempts after a retryable failure (default 3).
    pub max_retries: u32,
    /// The first backoff (default 500 ms); doubled each retry with jitter, capped at 30 s.
    pub retry_base: Duration,
    /// Limit for a whole non-streamed request, and for the response headers and each gap
    /// between chunks of a streamed one (default 120 s).
    pub request_timeout: Duration,
    /// `max_tokens` for Anthropic, which requires it (default 4096); the reply limit of a
    /// local model.
    pub max_output_tokens: u32,
    /// The model's context window in tokens, prompt plus reply (default 8192): what the
    /// client reports as `ModelClient::context_tokens`, sent to Ollama as `num_ctx`, and the
    /// size of a local model's context.
    pub context_tokens: u32,
    /// `WireApi::Local`: the GGUF file and threads (None: idle cores).
    pub local: Option<LocalModelSettings>,
    /// How tokens are sampled; unset fields are not sent (the provider's default).
    pub sampling: Sampling,
}

/// What a local (in-process) model needs besides the common settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalModelSettings {
    pub model_path: std::path::PathBuf,
    pub threads: Option<u32>,
}

impl Default for ProviderSettings {
    fn default() -> Self {
        Self {
            name: "main".to_owned(),
            wire_api: WireApi::OpenaiChat,
            base_url: "http://127.0.0.1:8080/v1".to_owned(),
            model: "gpt-4o-mini".to_owned(),
            api_key: None,
            stream: true,
            max_retries: 3,
            retry_base: Duration::from_millis(500),
            request_timeout: Duration::from_secs(120),
            max_output_tokens: 4096,
            context_tokens: 8192,
            local: None,
            sampling: Sampling::default(),
        }
    }
}

impl ProviderSettings {
    /// `{base_url}{path}` with any trailing `/` of the base removed; `path` starts with `/`.
    pub fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.base_url.trim_end_matches('/'))
    }
}

/// The API key is never printed.
impl fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("name", &self.name)
            .field("wire_api", &self.wire_api)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("stream", &self.stream)
            .field("max_retries", &self.max_retries)
            .field("retry_base", &self.retry_base)
            .field("request_timeout", &self.request_timeout)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("context_tokens", &self.context_tokens)
            .field("local", &self.local)
            .field("sampling", &self.sampling)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_trims_trailing_slashes() {
        let s = ProviderSettings {
            base_url: "http://h/v1/".into(),
            ..ProviderSettings::default()
        };
        assert_eq!(s.endpoint("/messages"), "http://h/v1/messages");
    }

    #[test]
    fn debug_redacts_the_api_key() {
        let s = ProviderSettings {
            api_key: Some("sk-secret".into()),
            ..ProviderSettings::default()
        };
        let text = format!("{s:?}");
        assert!(
            !text.contains("sk-secret") && text.contains("redacted"),
            "{text}"
        );
    }
}
