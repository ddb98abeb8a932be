//! reef-security integration tests: address classification and SSRF policy.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod classify;
mod commands;
mod ssrf;
