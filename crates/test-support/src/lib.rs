//! reef-test-support: dev-only helpers for reef tests: a scripted mock LLM server speaking every
//! wire API (OpenAI chat completions, Anthropic Messages, Ollama `/api/chat`), hermetic homes,
//! and the programs tests run beside the crate under test (the sandbox helper, and a simulated
//! kernel without Landlock), a real IRC server (ngircd) with a raw-socket client, and cluster
//! mode's PostgreSQL and NATS (`scripts/engines`).
//!
//! Functions here panic (with a message) when the test environment itself is broken, e.g. a
//! loopback port cannot be bound or a temporary directory cannot be created: that is a test
//! failure, not something a test could recover from.

mod anthropic;
pub mod discord;
mod engines;
mod home;
mod ircd;
pub mod mcp;
mod ollama;
mod openai;
mod programs;
mod recorded;
mod reply;
mod server;
pub mod slack;
pub mod telegram;
pub mod wat;

pub use engines::{Engine, Engines};
pub use home::TestHome;
pub use ircd::{IrcClient, IrcLine, Ngircd};
pub use programs::{git, sandbox_helper, venv_python, without_landlock};
pub use recorded::RecordedRequest;
pub use reply::MockReply;
pub use server::{MockLlm, Responder, bag_of_words};
