//! reef-tools integration tests: the registry and every built-in tool.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod files;
mod hidden;
mod http;
mod links;
mod list_search;
mod paths;
mod registry;
mod secrets;
mod shell;
mod support;
