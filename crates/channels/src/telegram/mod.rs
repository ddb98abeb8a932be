//! Telegram: a bot on the Bot API, written on reef's HTTP client (the API is small and JSON).
//! Updates arrive by long polling (`getUpdates`, resumed from the gateway's cursor so a
//! restart neither loses nor repeats one) or by webhook deliveries the daemon hands over;
//! replies are split at 4,096 UTF-16 units between paragraphs and sent with entities for
//! their Markdown; a typing indicator shows while an agent works; photos and documents come
//! with the message.

mod api;
mod channel;
mod feed;
pub mod markdown;
pub mod types;

pub use api::{ApiError, BotApi, MAX_FILE_BYTES};
pub use channel::TelegramChannel;
pub use feed::{Delivery, WebhookFeed};

/// The most UTF-16 units of one message's text.
pub const MESSAGE_MAX: usize = 4096;
