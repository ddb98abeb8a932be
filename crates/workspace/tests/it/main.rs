//! reef-workspace integration tests: real attempts to leave the workspace through links, `..`,
//! absolute paths, FIFOs, oversized files and planted names, each next to the case that works.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod confine;
mod create;
mod hidden;
mod read_only;
mod special;
mod support;
mod walk;
