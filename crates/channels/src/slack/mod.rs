//! Slack: an app whose events come over Socket Mode (a WebSocket opened with the app-level
//! token; each envelope acknowledged once the gateway has handled it, so Slack delivers
//! again what reef did not finish) or the Events API (signed posts the daemon hands over),
//! and whose replies go out through the Web API's `chat.postMessage`, in the thread of the
//! conversation they answer, as Slack's mrkdwn with `&`, `<` and `>` escaped (so an agent
//! cannot ping a channel).

mod api;
mod channel;
pub mod mrkdwn;
mod socket;

pub use api::{ApiError, WebApi};
pub use channel::{SlackChannel, SlackSource};

/// The most characters of one message reef sends (Slack's advice; it cuts at 40,000).
pub const MESSAGE_MAX: usize = 4000;
