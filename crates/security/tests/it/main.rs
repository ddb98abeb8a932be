//! reef-security integration tests: address classification, SSRF policy, command rules and
//! the leak detector's corpus, and the vault's cryptography.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod classify;
mod commands;
mod injection;
mod leaks;
mod ssrf;
mod vault;
