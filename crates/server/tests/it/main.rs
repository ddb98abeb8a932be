//! reef-server integration tests: one binary, one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod api;
mod hooks;
mod metrics;
mod openai;
mod openapi;
mod support;
mod tokens;
