//! reef-test-support: dev-only helpers for reef tests: a scripted mock LLM server speaking every
//! wire API (OpenAI chat completions, Anthropic Messages, Ollama `/api/chat`), and hermetic homes.
//!
//! Functions here panic (with a message) when the test environment itself is broken, e.g. a
//! loopback port cannot be bound or a temporary directory cannot be created: that is a test
//! failure, not something a test could recover from.

mod anthropic;
mod home;
mod ollama;
mod openai;
mod recorded;
mod reply;
mod server;

pub use home::TestHome;
pub use recorded::RecordedRequest;
pub use reply::MockReply;
pub use server::{MockLlm, Responder, bag_of_words};
