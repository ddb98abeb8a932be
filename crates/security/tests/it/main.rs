//! reef-security integration tests: address classification, SSRF policy, command rules and
//! the leak detector's corpus.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod classify;
mod commands;
mod leaks;
mod ssrf;
