//! reef-gateway end to end: a runtime with the mock model, the gateway, and a real ngircd
//! that operators and people reach over raw sockets.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod control;
mod discord;
mod rooms;
mod slack;
mod support;
mod telegram;
