//! `DiscordChannel`: the bot is reef's one identity on Discord (the overseer; agents speak
//! through it). A DM is a direct conversation; in a guild channel the bot hears a message
//! that mentions it or replies to it. `!command` lines are operator commands, for the user
//! ids in `[operators]`. The place after each handled message (session, sequence, resume
//! URL) is the channel's cursor: a reconnect, or a restarted daemon, resumes the session
//! there, and Discord replays what came since.

use super::MESSAGE_MAX;
use super::gateway::{Connection, Event, Login, jitter};
use super::rest::{Rest, RestError};
use super::types::{Message, Ready, User};
use crate::text;
use async_trait::async_trait;
use reef_config::DiscordConfig;
use reef_core::{
    Author, Channel, ChannelError, ChannelHealth, Conversation, Inbound, Outbound, Speaker,
};
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long READY (or RESUMED) may take after the login.
const READY_WAIT: Duration = Duration::from_secs(60);
/// The typing indicator lasts ten seconds; it is renewed this often...
const TYPING_EVERY: Duration = Duration::from_secs(8);
/// ...for at most this long without an answer.
const TYPING_FOR: Duration = Duration::from_secs(180);
/// The longest inbound text handed to an agent, in bytes.
const MAX_INBOUND: usize = 16 * 1024;

/// A session the gateway can resume.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Session {
    id: String,
    resume_url: String,
    /// The last sequence handled: every dispatch up to it is done with.
    seq: u64,
}

impl Session {
    /// The cursor kept after a message: `SESSION SEQ RESUME_URL`.
    fn cursor(&self, seq: u64) -> String {
        format!("{} {seq} {}", self.id, self.resume_url)
    }

    fn parse(cursor: &str) -> Option<Session> {
        let mut parts = cursor.split(' ');
        let (id, seq, url) = (parts.next()?, parts.next()?, parts.next()?);
        let url_ok = url.starts_with("wss://") || url.starts_with("ws://");
        let seq = seq.parse().ok()?;
        (parts.next().is_none() && !id.is_empty() && url_ok).then(|| Session {
            id: id.to_owned(),
            resume_url: url.to_owned(),
            seq,
        })
    }
}

/// A dispatch not yet done with.
type Dispatch = (u64, String, Value);

/// A Discord bot as a reef channel.
pub struct DiscordChannel {
    rest: Rest,
    config: DiscordConfig,
    token: String,
    operators: Vec<String>,
    conn: Option<Connection>,
    session: Option<Session>,
    me: Option<User>,
    /// Dispatches that arrived before READY or RESUMED, and the one being turned into a
    /// message (kept across a cancelled `recv`).
    pending: VecDeque<Dispatch>,
    /// The sequence of the message handed over, done with at the next `recv`.
    handed: Option<u64>,
    typing: HashMap<String, JoinHandle<()>>,
    /// Event names skipped so far (each logged once).
    skipped: HashSet<String>,
}

impl DiscordChannel {
    pub fn new(
        http: reqwest::Client,
        config: DiscordConfig,
        token: &str,
        operators: Vec<String>,
    ) -> DiscordChannel {
        DiscordChannel {
            rest: Rest::new(http, &config.api_url, token),
            config,
            token: token.to_owned(),
            operators,
            conn: None,
            session: None,
            me: None,
            pending: VecDeque::new(),
            handed: None,
            typing: HashMap::new(),
            skipped: HashSet::new(),
        }
    }

    /// Opens a connection and waits for READY (a new session) or RESUMED.
    async fn login(&mut self) -> Result<(), ChannelError> {
        let resuming = self.session.clone();
        let (url, login) = match &resuming {
            Some(s) => (
                s.resume_url.clone(),
                Login::Resume {
                    session_id: &s.id,
                    seq: s.seq,
                },
            ),
            None => {
                let url = match &self.config.gateway_url {
                    Some(url) => url.clone(),
                    None => self.rest.gateway_url().await.map_err(channel_error)?,
                };
                (url, Login::Identify)
            }
        };
        let mut conn = Connection::open(&url, &self.token, login).await?;
        let started = tokio::time::Instant::now();
        loop {
            let event = tokio::time::timeout_at(started + READY_WAIT, conn.events.recv())
                .await
                .map_err(|_| {
                    ChannelError::Connection(
                        "the gateway sent neither READY nor RESUMED in 60 s".into(),
                    )
                })?;
            match event {
                Some(Event::Dispatch { seq, name, data }) if name == "READY" => {
                    let ready: Ready = serde_json::from_value(data).map_err(|e| {
                        ChannelError::Connection(format!("READY is not readable: {e}"))
                    })?;
                    tracing::info!(bot = %ready.user.username, session = %ready.session_id, "connected to Discord");
                    self.session = Some(Session {
                        id: ready.session_id,
                        resume_url: ready.resume_gateway_url.unwrap_or(url),
                        seq,
                    });
                    self.me = Some(ready.user);
                    // Nothing from an earlier session is replayed in a new one.
                    self.pending.clear();
                    break;
                }
                Some(Event::Dispatch { name, .. }) if name == "RESUMED" => {
                    tracing::info!(replayed = self.pending.len(), "resumed the Discord session");
                    break;
                }
                // Replayed events come before RESUMED.
                Some(Event::Dispatch { seq, name, data }) => {
                    self.pending.push_back((seq, name, data))
                }
                Some(Event::Ended { error, resumable }) => {
                    if !resumable {
                        self.forget_session();
                    }
                    return Err(error);
                }
                None => {
                    return Err(ChannelError::Connection(
                        "the gateway connection ended".into(),
                    ));
                }
            }
        }
        self.conn = Some(conn);
        Ok(())
    }

    fn forget_session(&mut self) {
        self.session = None;
        self.pending.clear();
        self.handed = None;
    }

    /// Marks every dispatch up to `seq` done with.
    fn done_with(&mut self, seq: u64) {
        if let Some(session) = &mut self.session {
            session.seq = session.seq.max(seq);
        }
    }

    /// What a `MESSAGE_CREATE` means for reef: a message to hand over, or nothing.
    async fn inbound(&mut self, seq: u64, data: Value) -> Option<Inbound> {
        let message: Message = match serde_json::from_value(data) {
            Ok(message) => message,
            Err(e) => {
                tracing::warn!(error = %e, "skipping a MESSAGE_CREATE reef cannot read");
                return None;
            }
        };
        let me = self.me.as_ref()?;
        let author = &message.author;
        if author.bot || author.id == me.id || message.webhook_id.is_some() {
            return None;
        }
        // Joins, pins and the like are system messages.
        if !matches!(message.kind, 0 | 19) {
            return None;
        }
        let direct = message.guild_id.is_none();
        let replied = message
            .referenced_message
            .as_ref()
            .is_some_and(|m| m.author.id == me.id);
        let mention = [format!("<@{}>", me.id), format!("<@!{}>", me.id)];
        let mentioned = message.mentions.iter().any(|u| u.id == me.id)
            || mention.iter().any(|m| message.content.contains(m.as_str()));
        if !direct && !replied && !mentioned {
            return None;
        }
        // The bot's own mention taken out, line by line.
        let mut text = message
            .content
            .lines()
            .map(|line| {
                let line = mention
                    .iter()
                    .fold(line.to_owned(), |l, m| l.replace(m.as_str(), ""));
                line.split_whitespace().collect::<Vec<_>>().join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_owned();
        for attachment in &message.attachments {
            text.push_str(&format!(
                "\n[attachment {} ({} bytes) was not fetched]",
                attachment.filename, attachment.size
            ));
        }
        if text.trim().is_empty() {
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
        let cursor = self.session.as_ref().map(|s| s.cursor(seq));
        self.start_typing(&message.channel_id).await;
        let conversation = if direct {
            Conversation::Direct(message.channel_id.clone())
        } else {
            Conversation::Room(message.channel_id.clone())
        };
        Some(Inbound::Message {
            listener: Speaker::Overseer,
            conversation,
            author: Author {
                name: display_name(author),
                identity: author.id.clone(),
            },
            text,
            sanitized: clean.changed,
            addressed: true,
            key: Some(format!("{}:{}", message.channel_id, message.id)),
            cursor,
            files: Vec::new(),
        })
    }

    /// Shows "typing…" in `channel` now and every [`TYPING_EVERY`] until an answer goes
    /// there (or [`TYPING_FOR`] passes).
    async fn start_typing(&mut self, channel: &str) {
        if let Err(err) = self.rest.typing(channel).await {
            tracing::debug!(error = %err, "cannot show typing");
            return;
        }
        let rest = self.rest.clone();
        let target = channel.to_owned();
        let task = tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            while started.elapsed() < TYPING_FOR {
                tokio::time::sleep(TYPING_EVERY).await;
                if let Err(err) = rest.typing(&target).await {
                    tracing::debug!(error = %err, "cannot show typing");
                    return;
                }
            }
        });
        if let Some(old) = self.typing.insert(channel.to_owned(), task) {
            old.abort();
        }
        self.typing.retain(|_, task| !task.is_finished());
    }

    fn stop_typing(&mut self, channel: &str) {
        if let Some(task) = self.typing.remove(channel) {
            task.abort();
        }
    }
}

/// How a person is named to agents: their display name or username, made of characters an
/// inbox label keeps.
fn display_name(user: &User) -> String {
    text::label_name(
        user.global_name.as_deref().unwrap_or(&user.username),
        &user.id,
    )
}

/// A REST failure as the gateway's supervisor sees it.
fn channel_error(err: RestError) -> ChannelError {
    match err {
        RestError::Transport(m) => ChannelError::Connection(m),
        RestError::RateLimited { .. } => ChannelError::Connection(err.to_string()),
        RestError::Unauthorized(_) => ChannelError::Refused(err.to_string()),
        RestError::Refused { .. } => ChannelError::Invalid(err.to_string()),
    }
}

/// A Discord snowflake: digits only.
fn snowflake(text: &str) -> bool {
    !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit())
}

#[async_trait]
impl Channel for DiscordChannel {
    async fn connect(&mut self, _agents: &[(String, Vec<String>)]) -> Result<(), ChannelError> {
        for (_, task) in self.typing.drain() {
            task.abort();
        }
        if let Some(conn) = self.conn.take() {
            conn.close().await;
        }
        // What was read but not handled is replayed by the resumed session.
        self.pending.clear();
        self.handed = None;
        // The token is checked here, so a bad one is a clear error.
        let me = self.rest.me().await.map_err(channel_error)?;
        self.me = Some(me);
        let resuming = self.session.is_some();
        match self.login().await {
            Ok(()) => Ok(()),
            // The session could not be resumed: a fresh one, after the wait Discord asks
            // for (one to five seconds).
            Err(err) if resuming && self.session.is_none() => {
                tracing::info!(error = %err, "cannot resume the Discord session; identifying anew");
                tokio::time::sleep(Duration::from_secs_f64(1.0 + 4.0 * jitter())).await;
                self.login().await
            }
            Err(err) => Err(err),
        }
    }

    async fn recv(&mut self) -> Result<Inbound, ChannelError> {
        loop {
            if let Some(seq) = self.handed.take() {
                // The gateway asks for the next message only once it handled the last one.
                self.done_with(seq);
            }
            if self.pending.is_empty() {
                let Some(conn) = &mut self.conn else {
                    return Err(ChannelError::Connection("not connected".into()));
                };
                match conn.events.recv().await {
                    Some(Event::Dispatch { seq, name, data }) => {
                        self.pending.push_back((seq, name, data));
                    }
                    Some(Event::Ended { error, resumable }) => {
                        self.conn = None;
                        if !resumable {
                            self.forget_session();
                        }
                        return Err(error);
                    }
                    None => {
                        self.conn = None;
                        return Err(ChannelError::Connection(
                            "the gateway connection ended".into(),
                        ));
                    }
                }
            }
            let Some((seq, name, data)) = self.pending.front().cloned() else {
                continue;
            };
            let inbound = match name.as_str() {
                "MESSAGE_CREATE" => self.inbound(seq, data).await,
                "RESUMED" | "READY" => None,
                other => {
                    if self.skipped.insert(other.to_owned()) {
                        tracing::info!(event = %other, "skipping Discord events of this kind");
                    }
                    None
                }
            };
            self.pending.pop_front();
            match inbound {
                Some(inbound) => {
                    self.handed = Some(seq);
                    return Ok(inbound);
                }
                None => self.done_with(seq),
            }
        }
    }

    async fn send(&mut self, out: Outbound) -> Result<(), ChannelError> {
        let Outbound::Say { to, text, .. } = out else {
            // Agents have no identities of their own here.
            return Ok(());
        };
        let channel = to.name().to_owned();
        if !snowflake(&channel) {
            // No channel is configured for it (the control room).
            tracing::debug!(to = %channel, "nowhere to say this on Discord");
            return Ok(());
        }
        self.stop_typing(&channel);
        for piece in crate::telegram::markdown::split(&text, MESSAGE_MAX) {
            self.rest
                .create_message(&channel, &piece)
                .await
                .map_err(channel_error)?;
        }
        Ok(())
    }

    async fn close(&mut self, _reason: &str) {
        for (_, task) in self.typing.drain() {
            task.abort();
        }
        if let Some(conn) = self.conn.take() {
            conn.close().await;
        }
    }

    fn handle(&self, speaker: &Speaker) -> Option<String> {
        match speaker {
            Speaker::Overseer => self.me.as_ref().map(|me| me.username.clone()),
            Speaker::Agent(_) => None,
        }
    }

    fn is_operator(&self, author: &Author) -> bool {
        self.operators.contains(&author.identity)
    }

    fn same_name(&self, a: &str, b: &str) -> bool {
        a.eq_ignore_ascii_case(b)
    }

    fn health(&self) -> ChannelHealth {
        ChannelHealth {
            connected: usize::from(self.conn.is_some()),
            queued: 0,
        }
    }

    fn resume(&mut self, cursor: Option<String>) {
        // A session of this process is newer than any kept cursor.
        if self.session.is_none()
            && let Some(session) = cursor.as_deref().and_then(Session::parse)
        {
            self.session = Some(session);
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
    fn cursors_round_trip_and_bad_ones_are_ignored() {
        let session = Session {
            id: "abc".into(),
            resume_url: "wss://gateway-us-east1-b.discord.gg".into(),
            seq: 0,
        };
        let cursor = session.cursor(42);
        assert_eq!(
            Session::parse(&cursor),
            Some(Session { seq: 42, ..session })
        );
        for bad in [
            "",
            "abc",
            "abc 1",
            "abc x wss://a",
            "abc 1 http://a",
            "abc 1 wss://a b",
        ] {
            assert_eq!(Session::parse(bad), None, "{bad}");
        }
        assert!(snowflake("80351110224678912") && !snowflake("#control") && !snowflake(""));
    }
}
