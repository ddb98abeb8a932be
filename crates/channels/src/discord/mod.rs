//! Discord: a bot on the gateway, a WebSocket that delivers events (identify with intents,
//! heartbeats with jitter and ACK tracking, a zombie connection dropped, a session resumed
//! with its id and sequence so a reconnect or a restart neither loses nor repeats a
//! message), and on the REST API, which sends messages within its rate-limit buckets.
//! Replies are split at 2,000 characters between paragraphs; Discord renders the Markdown.

mod channel;
mod gateway;
mod rest;
pub mod types;

pub use channel::DiscordChannel;
pub use rest::{Rest, RestError};

/// The most characters of one message.
pub const MESSAGE_MAX: usize = 2000;

/// The gateway intents reef asks for: messages in guilds (1 << 9) and in DMs (1 << 12), and
/// their content (1 << 15, privileged: enabled for the bot in the developer portal).
pub const INTENTS: u64 = (1 << 9) | (1 << 12) | (1 << 15);

/// The gateway API version reef speaks.
pub const API_VERSION: u8 = 10;
