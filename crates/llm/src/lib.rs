//! reef-llm: model clients for reef: OpenAI chat completions, Anthropic Messages and Ollama,
//! streamed (SSE, NDJSON) or not, with retries, typed errors and provider-reported usage; failover chains
//! across providers; prices and the cost of a request; embedders (OpenAI-compatible endpoints and
//! the in-process model).

mod anthropic;
mod anthropic_stream;
mod client;
mod cost;
mod embeddings;
mod error;
mod failover;
mod http;
mod ollama;
mod openai;
mod openai_stream;
mod pinned;
mod retry;
mod settings;
pub mod sse;
mod wire;

pub use anthropic::AnthropicClient;
pub use client::{build_client, check_reachable};
pub use cost::{DEFAULT_PRICES, Price, Prices};
pub use embeddings::{
    EmbedderSettings, HttpEmbedder, LocalEngine, build_embedder, build_local_embedder,
};
pub use error::LlmError;
pub use failover::FailoverClient;
pub use http::{error_chain, http_client, http_client_without_redirects};
pub use ollama::OllamaClient;
pub use openai::OpenAiClient;
pub use pinned::http_client_pinned;
pub use retry::{classify_status, error_excerpt, parse_retry_after, retry_delay};
pub use settings::{LocalModelSettings, ProviderSettings};
