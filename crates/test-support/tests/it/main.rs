//! Integration tests of the mock LLM server, spoken to over raw HTTP/1.1, and of the fake
//! Telegram Bot API, spoken to by python-telegram-bot.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod dependency_direction;
mod discord_fake;
mod one_protocol;
mod raw;
mod server;
mod slack_fake;
mod telegram_fake;
