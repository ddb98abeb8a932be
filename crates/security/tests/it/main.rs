//! reef-security integration tests: address classification, SSRF policy and command rules.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod classify;
mod commands;
mod ssrf;
