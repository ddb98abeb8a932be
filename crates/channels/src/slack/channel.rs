//! `SlackChannel`: the app's bot is reef's one identity on Slack (the overseer; agents speak
//! through it). A DM is a direct conversation; in a channel the bot hears a message that
//! mentions it, or one in a thread it answered in. Each thread is a conversation of its own
//! (one agent per thread with a `spawn:` route), and its answers go into that thread.
//! `!command` lines are operator commands, for the user ids in `[operators]`.

use super::MESSAGE_MAX;
use super::api::{ApiError, WebApi};
use super::mrkdwn;
use super::socket::{Socket, SocketEvent};
use crate::telegram::WebhookFeed;
use crate::text;
use async_trait::async_trait;
use reef_core::{
    Author, Channel, ChannelError, ChannelHealth, Conversation, Inbound, Outbound, Speaker,
};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashSet;
use tokio::sync::oneshot;

/// The longest inbound text handed to an agent, in bytes.
const MAX_INBOUND: usize = 16 * 1024;
/// The threads remembered as the bot's own conversations.
const MAX_THREADS: usize = 10_000;

/// Where events come from.
enum Source {
    Socket {
        app_token: String,
        socket: Option<Socket>,
    },
    Events {
        feed: WebhookFeed,
    },
}

/// How the platform learns an event was handled.
enum Receipt {
    /// Socket Mode: the envelope's acknowledgement.
    Envelope(String),
    /// The Events API: the daemon's answer to Slack's request.
    Hook(oneshot::Sender<()>),
}

/// An event being turned into a message (kept across a cancelled `recv`).
struct Pending {
    payload: Value,
    receipt: Receipt,
}

/// The bot, from `auth.test`.
#[derive(Clone, Debug, Deserialize)]
struct Me {
    user_id: String,
    #[serde(default)]
    user: Option<String>,
}

/// A Slack app as a reef channel.
pub struct SlackChannel {
    api: WebApi,
    bot_token: String,
    operators: Vec<String>,
    source: Source,
    me: Option<Me>,
    current: Option<Pending>,
    handed: Option<Receipt>,
    /// `CHANNEL/THREAD_TS` of threads the bot answered in: later messages there are
    /// addressed to it.
    threads: HashSet<String>,
    /// Event and envelope kinds skipped so far (each logged once).
    skipped: HashSet<String>,
}

impl SlackChannel {
    /// In Socket Mode with `app_token`, or fed by the daemon's Events API route.
    pub fn new(
        http: reqwest::Client,
        api_url: &str,
        bot_token: &str,
        operators: Vec<String>,
        mode: SlackSource,
    ) -> SlackChannel {
        let source = match mode {
            SlackSource::Socket { app_token } => Source::Socket {
                app_token,
                socket: None,
            },
            SlackSource::Events { feed } => Source::Events { feed },
        };
        SlackChannel {
            api: WebApi::new(http, api_url),
            bot_token: bot_token.to_owned(),
            operators,
            source,
            me: None,
            current: None,
            handed: None,
            threads: HashSet::new(),
            skipped: HashSet::new(),
        }
    }

    /// The next event from the socket or the route.
    async fn next_pending(&mut self) -> Result<Pending, ChannelError> {
        loop {
            match &mut self.source {
                Source::Socket { socket, .. } => {
                    let Some(live) = socket else {
                        return Err(ChannelError::Connection("not connected".into()));
                    };
                    match live.events.recv().await {
                        Some(SocketEvent::Envelope { id, kind, payload }) => {
                            if kind == "events_api" {
                                return Ok(Pending {
                                    payload,
                                    receipt: Receipt::Envelope(id),
                                });
                            }
                            // Slash commands and interactions are not reef's (yet): taken
                            // so Slack does not send them again.
                            live.ack(id);
                            if self.skipped.insert(kind.clone()) {
                                tracing::info!(%kind, "skipping Slack envelopes of this kind");
                            }
                        }
                        Some(SocketEvent::Ended(err)) => {
                            *socket = None;
                            return Err(err);
                        }
                        None => {
                            *socket = None;
                            return Err(ChannelError::Connection(
                                "the Socket Mode connection ended".into(),
                            ));
                        }
                    }
                }
                Source::Events { feed } => {
                    let Some((payload, done)) = feed.recv().await else {
                        return Err(ChannelError::Connection(
                            "the daemon's Events API route is gone".into(),
                        ));
                    };
                    return Ok(Pending {
                        payload,
                        receipt: Receipt::Hook(done),
                    });
                }
            }
        }
    }

    /// Tells the platform an event is done with.
    fn settle(&self, receipt: Receipt) {
        match receipt {
            Receipt::Envelope(id) => {
                if let Source::Socket {
                    socket: Some(socket),
                    ..
                } = &self.source
                {
                    socket.ack(id);
                }
            }
            Receipt::Hook(done) => {
                let _answered = done.send(());
            }
        }
    }

    /// What an `event_callback` means for reef: a message to hand over, or nothing.
    fn inbound(&mut self, payload: &Value) -> Option<Inbound> {
        let event = &payload["event"];
        let kind = event["type"].as_str().unwrap_or_default();
        // Edits, deletions, joins and bots' own posts are subtypes; a reply also sent to the
        // channel is still a person's message.
        let subtype = event["subtype"].as_str();
        if !matches!(kind, "message" | "app_mention")
            || subtype.is_some_and(|s| s != "thread_broadcast")
        {
            let name = format!("{kind}/{}", subtype.unwrap_or_default());
            if self.skipped.insert(name.clone()) {
                tracing::info!(kind = %name, "skipping Slack events of this kind");
            }
            return None;
        }
        let me = self.me.as_ref()?;
        let user = event["user"].as_str()?;
        if user == me.user_id || event.get("bot_id").is_some_and(|b| !b.is_null()) {
            return None;
        }
        let channel = event["channel"].as_str()?;
        let ts = event["ts"].as_str()?;
        let thread = event["thread_ts"].as_str();
        let direct = event["channel_type"] == "im" || channel.starts_with('D');
        let mention = format!("<@{}>", me.user_id);
        let raw = event["text"].as_str().unwrap_or_default();
        let place = format!("{channel}/{}", thread.unwrap_or(ts));
        let in_our_thread = thread.is_some() && self.threads.contains(&place);
        if !direct && kind != "app_mention" && !raw.contains(&mention) && !in_our_thread {
            return None;
        }
        let text = mrkdwn::unescape(&raw.replace(&mention, " "));
        let text = text
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_owned();
        if text.is_empty() {
            return None;
        }
        let clean = text::sanitize_multiline(text.as_bytes());
        let mut text = clean.text;
        if text.len() > MAX_INBOUND {
            let cut = text::floor_char_boundary(&text, MAX_INBOUND);
            let more = text.len() - cut;
            text.truncate(cut);
            text.push_str(&format!("\n[message cut: {more} more bytes]"));
        }
        // A DM is one conversation unless it is threaded; in a channel every thread is.
        let conversation = match (direct, thread) {
            (true, None) => Conversation::Direct(channel.to_owned()),
            (true, Some(_)) => Conversation::Direct(place),
            (false, _) => Conversation::Room(place),
        };
        Some(Inbound::Message {
            listener: Speaker::Overseer,
            conversation,
            author: Author {
                name: user.to_owned(),
                identity: user.to_owned(),
            },
            text,
            sanitized: clean.changed,
            addressed: true,
            key: Some(format!("{channel}:{ts}")),
            cursor: None,
            files: Vec::new(),
        })
    }

    /// Posts `text` (Markdown) in `channel`, in the thread `thread` when given.
    async fn say(
        &mut self,
        channel: &str,
        thread: Option<&str>,
        text: &str,
    ) -> Result<(), ChannelError> {
        for piece in crate::telegram::markdown::split(text, MESSAGE_MAX) {
            let mut body = json!({
                "channel": channel,
                "text": mrkdwn::from_markdown(&piece),
                "unfurl_links": false,
                "unfurl_media": false,
            });
            if let Some(thread) = thread {
                body["thread_ts"] = json!(thread);
            }
            self.api
                .call::<Value>("chat.postMessage", &self.bot_token, &body)
                .await
                .map_err(channel_error)?;
        }
        if let Some(thread) = thread {
            if self.threads.len() >= MAX_THREADS {
                self.threads.clear();
            }
            self.threads.insert(format!("{channel}/{thread}"));
        }
        Ok(())
    }
}

/// Where a [`SlackChannel`]'s events come from.
pub enum SlackSource {
    /// Socket Mode, connected with the app-level token.
    Socket { app_token: String },
    /// The Events API, through the daemon's route.
    Events { feed: WebhookFeed },
}

/// A Web API failure as the gateway's supervisor sees it.
fn channel_error(err: ApiError) -> ChannelError {
    match err {
        ApiError::Transport(m) => ChannelError::Connection(m),
        ApiError::RateLimited { .. } => ChannelError::Connection(err.to_string()),
        ApiError::Unauthorized(_) => ChannelError::Refused(err.to_string()),
        ApiError::Refused { .. } => ChannelError::Invalid(err.to_string()),
    }
}

/// A Slack id (`C…`, `D…`, `G…`): upper-case letters and digits.
fn slack_id(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 32
        && text
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// A message timestamp: digits, a dot, digits.
fn slack_ts(text: &str) -> bool {
    text.split_once('.').is_some_and(|(a, b)| {
        !a.is_empty() && !b.is_empty() && (a.bytes().chain(b.bytes())).all(|c| c.is_ascii_digit())
    })
}

#[async_trait]
impl Channel for SlackChannel {
    async fn connect(&mut self, _agents: &[(String, Vec<String>)]) -> Result<(), ChannelError> {
        self.current = None;
        self.handed = None;
        let me: Me = self
            .api
            .call("auth.test", &self.bot_token, &json!({}))
            .await
            .map_err(channel_error)?;
        tracing::info!(bot = ?me.user, id = %me.user_id, "connected to Slack");
        self.me = Some(me);
        if let Source::Socket { app_token, socket } = &mut self.source {
            *socket = None;
            #[derive(Deserialize)]
            struct Opened {
                url: String,
            }
            let opened: Opened = self
                .api
                .call("apps.connections.open", app_token, &json!({}))
                .await
                .map_err(|e| match e {
                    ApiError::Unauthorized(_) => ChannelError::Refused(format!(
                        "{e} (Socket Mode needs the app-level token, xapp-…, with connections:write)"
                    )),
                    other => channel_error(other),
                })?;
            *socket = Some(Socket::open(&opened.url).await?);
        }
        Ok(())
    }

    async fn recv(&mut self) -> Result<Inbound, ChannelError> {
        loop {
            if let Some(receipt) = self.handed.take() {
                // The gateway asks for the next message only once it handled the last one.
                self.settle(receipt);
            }
            if self.current.is_none() {
                self.current = Some(self.next_pending().await?);
            }
            let Some(pending) = self.current.take() else {
                continue;
            };
            match self.inbound(&pending.payload) {
                Some(inbound) => {
                    self.handed = Some(pending.receipt);
                    return Ok(inbound);
                }
                None => self.settle(pending.receipt),
            }
        }
    }

    async fn send(&mut self, out: Outbound) -> Result<(), ChannelError> {
        let Outbound::Say { to, text, .. } = out else {
            // Agents have no identities of their own here.
            return Ok(());
        };
        let (channel, thread) = match to.name().split_once('/') {
            Some((channel, thread)) => (channel.to_owned(), Some(thread.to_owned())),
            None => (to.name().to_owned(), None),
        };
        if !slack_id(&channel) || thread.as_deref().is_some_and(|t| !slack_ts(t)) {
            tracing::debug!(to = %to.name(), "nowhere to say this on Slack");
            return Ok(());
        }
        self.say(&channel, thread.as_deref(), &text).await
    }

    async fn close(&mut self, _reason: &str) {
        if let Source::Socket { socket, .. } = &mut self.source {
            // What was not acknowledged, Slack delivers again on the next connection.
            *socket = None;
        }
    }

    fn handle(&self, speaker: &Speaker) -> Option<String> {
        match speaker {
            Speaker::Overseer => self.me.as_ref().and_then(|me| me.user.clone()),
            Speaker::Agent(_) => None,
        }
    }

    fn is_operator(&self, author: &Author) -> bool {
        self.operators.contains(&author.identity)
    }

    fn same_name(&self, a: &str, b: &str) -> bool {
        a == b
    }

    fn health(&self) -> ChannelHealth {
        let connected = match &self.source {
            Source::Socket { socket, .. } => usize::from(socket.is_some()),
            Source::Events { .. } => usize::from(self.me.is_some()),
        };
        ChannelHealth {
            connected,
            queued: 0,
        }
    }

    fn answer_limit(&self) -> usize {
        // Eight messages' worth; the transcript keeps the rest.
        8 * MESSAGE_MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_timestamps() {
        assert!(slack_id("C0123ABC") && slack_id("D1") && !slack_id("#general") && !slack_id(""));
        assert!(slack_ts("1700000000.000100") && !slack_ts("1700000000") && !slack_ts("a.b"));
    }
}
