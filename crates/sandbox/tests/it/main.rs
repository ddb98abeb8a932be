//! reef-sandbox integration tests: running, capturing, killing, probing and the escape suite
//! of the `landlock` backend.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod escape;
mod kill;
mod microvm;
mod probe;
mod run;
mod spawn;
mod support;
mod terminal;
mod warm;
