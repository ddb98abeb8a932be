//! reef-channels against a real IRC server (ngircd, started by the tests on a free loopback
//! port).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod irc;
