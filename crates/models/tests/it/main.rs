//! Integration tests of reef-models: pulls from a local file server (resume, checksums, wheel
//! mirrors, source order) and the models directory.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod files;
mod pull;
mod store;
