//! `TelegramChannel`: one bot is reef's one identity here (the overseer; agents speak through
//! it). A private chat is a direct conversation; in a group the bot hears a line that
//! mentions it, answers one of its messages, or is a `/command`. `/command` lines become the
//! overseer's `!command` (for operators, by user id); `/start` goes to the agent as it is.
//! People outside `allowed_users` get one polite refusal an hour.

use super::MESSAGE_MAX;
use super::api::{BotApi, MAX_FILE_BYTES};
use super::feed::{ALLOWED_UPDATES, Delivery, FeedItem, Poller, WebhookFeed, channel_error};
use super::markdown;
use super::types::{File, Message, Update, User};
use crate::text;
use async_trait::async_trait;
use reef_config::{TelegramConfig, TelegramMode};
use reef_core::{
    Author, Channel, ChannelError, ChannelHealth, Conversation, Inbound, Outbound, Speaker, Upload,
};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How often a refused person is told so.
const REFUSAL_EVERY: Duration = Duration::from_secs(3600);
/// A typing indicator lasts five seconds on the platform; it is renewed this often...
const TYPING_EVERY: Duration = Duration::from_millis(4500);
/// ...for at most this long without an answer.
const TYPING_FOR: Duration = Duration::from_secs(180);
/// The longest inbound text handed to an agent, in bytes.
const MAX_INBOUND: usize = 16 * 1024;
/// How long one send may take.
const SEND_WAIT: Duration = Duration::from_secs(60);

/// Where updates come from.
enum Source {
    Poll(Option<Poller>),
    Webhook {
        url: String,
        secret: String,
        feed: WebhookFeed,
    },
}

/// A Telegram bot as a reef channel.
pub struct TelegramChannel {
    api: BotApi,
    config: TelegramConfig,
    operators: Vec<String>,
    source: Source,
    /// The bot itself, from `getMe` at connect.
    me: Option<User>,
    /// The update id to resume from.
    offset: Option<i64>,
    /// The update being turned into a message (kept across a cancelled `recv`).
    current: Option<Delivery>,
    /// The acknowledgement of the last message handed over, sent at the next `recv` (the
    /// gateway handles one message before it asks for the next).
    handed: Option<oneshot::Sender<()>>,
    typing: HashMap<i64, JoinHandle<()>>,
    refused: HashMap<i64, Instant>,
    /// Update kinds skipped so far (each logged once).
    skipped: HashSet<String>,
}

impl TelegramChannel {
    /// A bot with `token` under `config`; `webhook` (with its secret) in webhook mode.
    pub fn new(
        http: reqwest::Client,
        config: TelegramConfig,
        token: &str,
        operators: Vec<String>,
        webhook: Option<(String, WebhookFeed)>,
    ) -> Result<TelegramChannel, ChannelError> {
        let api = BotApi::new(http, &config.api_url, token);
        let source = match (&config.mode, webhook) {
            (TelegramMode::Poll, _) => Source::Poll(None),
            (TelegramMode::Webhook { url }, Some((secret, feed))) => Source::Webhook {
                url: url.clone(),
                secret,
                feed,
            },
            (TelegramMode::Webhook { .. }, None) => {
                return Err(ChannelError::Invalid(
                    "webhook mode needs the daemon's delivery route".into(),
                ));
            }
        };
        Ok(TelegramChannel {
            api,
            config,
            operators,
            source,
            me: None,
            offset: None,
            current: None,
            handed: None,
            typing: HashMap::new(),
            refused: HashMap::new(),
            skipped: HashSet::new(),
        })
    }

    /// The next update from the poll or the webhook.
    async fn next_delivery(&mut self) -> Result<Delivery, ChannelError> {
        loop {
            match &mut self.source {
                Source::Poll(poller) => {
                    let Some(poller) = poller else {
                        return Err(ChannelError::Connection("not connected".into()));
                    };
                    return match poller.rx.recv().await {
                        Some(FeedItem::Update(delivery)) => Ok(*delivery),
                        Some(FeedItem::Failed(err)) => Err(err),
                        None => Err(ChannelError::Connection("the long poll stopped".into())),
                    };
                }
                Source::Webhook { feed, .. } => {
                    let Some((value, done)) = feed.recv().await else {
                        return Err(ChannelError::Connection(
                            "the daemon's webhook route is gone".into(),
                        ));
                    };
                    match serde_json::from_value::<Update>(value) {
                        Ok(update) => return Ok(Delivery { update, done }),
                        Err(err) => {
                            tracing::warn!(error = %err, "a webhook delivery is not an update");
                            let _answered = done.send(());
                        }
                    }
                }
            }
        }
    }

    /// What `update` means for reef: a message to hand over, or nothing.
    async fn inbound(&mut self, update: &Update) -> Option<Inbound> {
        let Some(message) = &update.message else {
            let kind = update.kind().to_owned();
            if self.skipped.insert(kind.clone()) {
                tracing::info!(%kind, "skipping Telegram updates of this kind");
            }
            return None;
        };
        let from = message.from.as_ref()?;
        if from.is_bot {
            return None;
        }
        let identity = from.id.to_string();
        let operator = self.operators.contains(&identity);
        if !operator
            && !self.config.allowed_users.is_empty()
            && !self.config.allowed_users.contains(&from.id)
        {
            self.refuse(message.chat.id, from.id).await;
            return None;
        }
        let private = message.chat.kind == "private";
        let raw = message
            .text
            .as_deref()
            .or(message.caption.as_deref())
            .unwrap_or_default();
        let mut text = match self.command(raw) {
            Command::Operator(line) => line,
            Command::Other(_) if !private => return None,
            Command::Other(line) => line,
            Command::None if !private && !self.addressed(message, raw) => return None,
            Command::None => self.without_mention(raw),
        };
        let mut files = Vec::new();
        for (name, file_id) in attachments(message) {
            match self.fetch(&file_id).await {
                Ok(bytes) => files.push(Upload { name, bytes }),
                Err(err) => {
                    tracing::warn!(error = %err, "cannot fetch a file from Telegram");
                    text.push_str(&format!("\n[{name} could not be fetched: {err}]"));
                }
            }
        }
        if text.trim().is_empty() && files.is_empty() {
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
        let chat = message.chat.id;
        self.start_typing(chat).await;
        let conversation = if private {
            Conversation::Direct(chat.to_string())
        } else {
            Conversation::Room(chat.to_string())
        };
        Some(Inbound::Message {
            listener: Speaker::Overseer,
            conversation,
            author: Author {
                name: display_name(from),
                identity,
            },
            text,
            sanitized: clean.changed,
            addressed: true,
            key: Some(format!("{chat}:{}", message.message_id)),
            cursor: Some((update.update_id + 1).to_string()),
            files,
        })
    }

    /// A `/command` line: the overseer's `!command`, `/start` as it is, or none.
    fn command(&self, text: &str) -> Command {
        let Some(rest) = text.strip_prefix('/') else {
            return Command::None;
        };
        let (head, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let (name, bot) = head.split_once('@').unwrap_or((head, ""));
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Command::None;
        }
        let mine = bot.is_empty() || self.is_me(bot);
        match (mine, name) {
            (false, _) => Command::Other(String::new()),
            (true, "start") => Command::Other(text.to_owned()),
            (true, _) => {
                Command::Operator(format!("!{name} {}", args.trim()).trim_end().to_owned())
            }
        }
    }

    fn is_me(&self, username: &str) -> bool {
        self.me
            .as_ref()
            .and_then(|me| me.username.as_deref())
            .is_some_and(|own| own.eq_ignore_ascii_case(username))
    }

    /// In a group: whether the line mentions the bot or answers one of its messages.
    fn addressed(&self, message: &Message, text: &str) -> bool {
        let replied = message
            .reply_to_message
            .as_ref()
            .and_then(|m| m.from.as_ref())
            .zip(self.me.as_ref())
            .is_some_and(|(to, me)| to.id == me.id);
        replied || text.split_whitespace().any(|w| self.is_mention(w))
    }

    /// Whether `word` is `@` and the bot's name (with punctuation around it).
    fn is_mention(&self, word: &str) -> bool {
        word.trim_matches(|c: char| !c.is_alphanumeric() && c != '@' && c != '_')
            .strip_prefix('@')
            .is_some_and(|name| self.is_me(name))
    }

    /// `text` without the bot's `@name`.
    fn without_mention(&self, text: &str) -> String {
        text.split(' ')
            .filter(|w| !self.is_mention(w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Tells someone outside `allowed_users` so, at most once an hour.
    async fn refuse(&mut self, chat: i64, user: i64) {
        let now = Instant::now();
        if self
            .refused
            .get(&user)
            .is_some_and(|at| now.duration_since(*at) < REFUSAL_EVERY)
        {
            return;
        }
        self.refused.insert(user, now);
        // Keep the map small: forget refusals older than the period.
        self.refused
            .retain(|_, at| now.duration_since(*at) < REFUSAL_EVERY);
        let body = json!({
            "chat_id": chat,
            "text": "Sorry, this bot only talks with people its operator has allowed.",
        });
        if let Err(err) = self
            .api
            .call::<Value>("sendMessage", &body, SEND_WAIT)
            .await
        {
            tracing::info!(error = %err, "cannot send a refusal");
        }
    }

    /// The bytes of the file `file_id`.
    async fn fetch(&self, file_id: &str) -> Result<Vec<u8>, String> {
        let file: File = self
            .api
            .call("getFile", &json!({"file_id": file_id}), SEND_WAIT)
            .await
            .map_err(|e| e.to_string())?;
        if file.file_size.is_some_and(|n| n > MAX_FILE_BYTES) {
            return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
        }
        let path = file.file_path.ok_or("Telegram gave no path")?;
        self.api.download(&path).await.map_err(|e| e.to_string())
    }

    /// Shows "typing…" in `chat` now, and again until an answer goes there (or
    /// [`TYPING_FOR`] passes).
    async fn start_typing(&mut self, chat: i64) {
        let body = json!({"chat_id": chat, "action": "typing"});
        if let Err(err) = self
            .api
            .call::<Value>("sendChatAction", &body, SEND_WAIT)
            .await
        {
            tracing::debug!(error = %err, "cannot show typing");
            return;
        }
        let api = self.api.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            while started.elapsed() < TYPING_FOR {
                tokio::time::sleep(TYPING_EVERY).await;
                if let Err(err) = api.call::<Value>("sendChatAction", &body, SEND_WAIT).await {
                    tracing::debug!(error = %err, "cannot show typing");
                    return;
                }
            }
        });
        if let Some(old) = self.typing.insert(chat, task) {
            old.abort();
        }
        self.typing.retain(|_, task| !task.is_finished());
    }

    fn stop_typing(&mut self, chat: i64) {
        if let Some(task) = self.typing.remove(&chat) {
            task.abort();
        }
    }

    /// Sends `text` (Markdown) to `chat`, in pieces of at most [`MESSAGE_MAX`] units.
    async fn say(&mut self, chat: i64, text: &str) -> Result<(), ChannelError> {
        self.stop_typing(chat);
        for piece in markdown::split(text, MESSAGE_MAX) {
            let rendered = markdown::render(&piece);
            let mut body = json!({"chat_id": chat, "text": rendered.text});
            if !rendered.entities.is_empty() {
                body["entities"] = json!(rendered.entities);
            }
            match self
                .api
                .call::<Value>("sendMessage", &body, SEND_WAIT)
                .await
            {
                Ok(_) => {}
                // Entities the platform will not take: the piece as it was written.
                Err(super::ApiError::Refused { description, .. })
                    if !rendered.entities.is_empty() && description.contains("entit") =>
                {
                    tracing::info!(%description, "sending a message without its formatting");
                    let plain = json!({"chat_id": chat, "text": piece});
                    self.api
                        .call::<Value>("sendMessage", &plain, SEND_WAIT)
                        .await
                        .map_err(channel_error)?;
                }
                Err(err) => return Err(channel_error(err)),
            }
        }
        Ok(())
    }
}

enum Command {
    /// An operator command, as the overseer takes it (`!list`).
    Operator(String),
    /// A command for another bot (empty), or one the agent gets as it is (`/start`).
    Other(String),
    /// Not a command.
    None,
}

/// The files a message carries: the largest size of a photo, a document.
fn attachments(message: &Message) -> Vec<(String, String)> {
    let mut files = Vec::new();
    if let Some(photo) = message
        .photo
        .iter()
        .max_by_key(|p| u64::from(p.width) * u64::from(p.height))
    {
        files.push((
            format!("photo-{}.jpg", safe_name(&photo.file_unique_id)),
            photo.file_id.clone(),
        ));
    }
    if let Some(doc) = &message.document {
        let name = doc
            .file_name
            .as_deref()
            .map(safe_name)
            .filter(|n| !n.is_empty() && n != "." && n != "..")
            .unwrap_or_else(|| format!("document-{}", safe_name(&doc.file_unique_id)));
        files.push((name, doc.file_id.clone()));
    }
    files
}

/// A file name with nothing but letters, digits, `.`, `-` and `_` (no path, no hidden file).
fn safe_name(name: &str) -> String {
    let mut clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    while clean.starts_with('.') {
        clean.remove(0);
    }
    clean.truncate(100);
    clean
}

/// How a person is named to agents: their username, else their first name, made of
/// characters an inbox label keeps (letters, digits, `_`, `-`).
fn display_name(user: &User) -> String {
    text::label_name(
        user.username.as_deref().unwrap_or(&user.first_name),
        &user.id.to_string(),
    )
}

#[async_trait]
impl Channel for TelegramChannel {
    async fn connect(&mut self, _agents: &[(String, Vec<String>)]) -> Result<(), ChannelError> {
        for (_, task) in self.typing.drain() {
            task.abort();
        }
        self.current = None;
        self.handed = None;
        let me = self.api.get_me().await.map_err(channel_error)?;
        tracing::info!(bot = ?me.username, id = me.id, "connected to Telegram");
        self.me = Some(me);
        match &mut self.source {
            Source::Poll(poller) => {
                // A webhook left set would make every getUpdates fail.
                self.api
                    .call::<Value>("deleteWebhook", &json!({}), SEND_WAIT)
                    .await
                    .map_err(channel_error)?;
                *poller = Some(Poller::start(
                    self.api.clone(),
                    self.offset,
                    self.config.poll_timeout_secs,
                ));
            }
            Source::Webhook { url, secret, .. } => {
                let body = json!({
                    "url": url,
                    "secret_token": secret,
                    "allowed_updates": ALLOWED_UPDATES,
                });
                self.api
                    .call::<Value>("setWebhook", &body, SEND_WAIT)
                    .await
                    .map_err(channel_error)?;
            }
        }
        Ok(())
    }

    async fn recv(&mut self) -> Result<Inbound, ChannelError> {
        loop {
            if self.current.is_none() {
                // The gateway asks for the next message only once it handled the last one.
                if let Some(handed) = self.handed.take() {
                    let _moved_on = handed.send(());
                }
                self.current = Some(self.next_delivery().await?);
            }
            let Some(delivery) = self.current.as_ref() else {
                continue;
            };
            let update = delivery.update.clone();
            let inbound = self.inbound(&update).await;
            let Some(delivery) = self.current.take() else {
                continue;
            };
            self.offset = Some(update.update_id + 1);
            match inbound {
                Some(inbound) => {
                    self.handed = Some(delivery.done);
                    return Ok(inbound);
                }
                None => {
                    let _moved_on = delivery.done.send(());
                }
            }
        }
    }

    async fn send(&mut self, out: Outbound) -> Result<(), ChannelError> {
        let Outbound::Say { to, text, .. } = out else {
            // Agents have no identities of their own here.
            return Ok(());
        };
        match to.name().parse::<i64>() {
            Ok(chat) => self.say(chat, &text).await,
            Err(_) => {
                // No chat is configured for it (the control room without control_chat).
                tracing::debug!(to = %to.name(), "nowhere to say this on Telegram");
                Ok(())
            }
        }
    }

    async fn close(&mut self, _reason: &str) {
        for (_, task) in self.typing.drain() {
            task.abort();
        }
        if let Source::Poll(poller) = &mut self.source {
            *poller = None;
        }
    }

    fn handle(&self, speaker: &Speaker) -> Option<String> {
        match speaker {
            Speaker::Overseer => self.me.as_ref().and_then(|me| me.username.clone()),
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
        let connected = match &self.source {
            Source::Poll(poller) => usize::from(poller.is_some()),
            Source::Webhook { .. } => usize::from(self.me.is_some()),
        };
        ChannelHealth {
            connected,
            queued: 0,
        }
    }

    fn resume(&mut self, cursor: Option<String>) {
        if let Some(offset) = cursor.and_then(|c| c.parse().ok()) {
            self.offset = Some(offset);
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
    fn file_and_person_names_are_safe() {
        assert_eq!(safe_name("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(safe_name(".bashrc"), "bashrc");
        assert_eq!(safe_name("report 2026.pdf"), "report_2026.pdf");
        let user = |username: Option<&str>, first: &str| User {
            id: 7,
            is_bot: false,
            first_name: first.into(),
            username: username.map(str::to_owned),
        };
        assert_eq!(display_name(&user(Some("alice"), "Alice")), "alice");
        assert_eq!(display_name(&user(None, "Zoë Smith")), "ZoëSmith");
        assert_eq!(display_name(&user(None, "@~:")), "user7");
    }
}
