//! reef's channels, the doors through which people reach agents: the text rules every channel
//! shares ([`text`]: splitting a long reply, making inbound text safe to hand a model), the
//! IRC protocol ([`irc`]: messages, masks, line budgets) and the Telegram bot ([`telegram`]:
//! the Bot API, long polling and webhooks, Markdown as entities) and the Discord bot
//! ([`discord`]: the gateway and its sessions, the REST API and its rate limits) and the
//! Slack app ([`slack`]: Socket Mode or the Events API, the Web API, mrkdwn).

pub mod discord;
pub mod irc;
pub mod slack;
pub mod telegram;
pub mod text;
mod tls;
mod websocket;
