//! Integration tests of reef-llm's clients against the scripted mock LLM server.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod common;
mod embeddings;
mod errors;
mod failover;
mod reachable;
mod replies;
mod tools;
mod wire;
