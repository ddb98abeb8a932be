#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod clock;
mod cron;
