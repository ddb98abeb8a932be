//! reef-sandbox integration tests: running, capturing, killing and probing.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod kill;
mod probe;
mod run;
mod support;
