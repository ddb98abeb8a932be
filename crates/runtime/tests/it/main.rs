//! reef-runtime integration tests: one binary, one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod approvals;
mod caps;
mod daemon;
mod debug;
mod jobs;
mod long_life;
mod mcp;
mod operator;
mod routines;
mod skills;
mod templates;
