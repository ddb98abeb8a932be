//! A fake Discord on loopback, following the documented wire format: the REST API under
//! `/api/v10` (`Authorization: Bot TOKEN`; users, the application, the gateway's URL,
//! messages and typing; rate-limit headers per bucket and 429s with `retry_after`, `Via` and
//! a JSON body as Discord sends them) and the gateway at `/gateway` (HELLO, IDENTIFY → READY,
//! heartbeats acknowledged, RESUME replaying what the session missed and then RESUMED,
//! RECONNECT and INVALID_SESSION on demand, close code 4004 for a wrong token). A session
//! outlives its connection, as Discord's does, unless the client closes with 1000 or 1001.
//! A test pushes what people write and reads what the bot sent. Its answers are checked by
//! running the discord.py library against it.

use axum::Router;
use axum::extract::ws::{CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// The bot's user id and name.
pub const BOT_ID: &str = "900000000000000001";
pub const BOT_NAME: &str = "reef-test";
/// The guild messages in rooms belong to.
pub const GUILD_ID: &str = "700000000000000001";
/// The longest message content, in characters.
const MESSAGE_MAX: usize = 2000;
/// The MESSAGE_CONTENT intent.
const MESSAGE_CONTENT: u64 = 1 << 15;

/// A message the bot sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    pub channel_id: String,
    pub content: String,
    pub id: String,
    /// The request body as it came.
    pub body: Value,
}

/// What one gateway connection is told to do.
enum Command {
    Send(Value),
    Close(u16, &'static str),
}

struct Session {
    id: String,
    intents: u64,
    /// Every dispatch of the session, by sequence.
    log: Vec<(u64, Value)>,
    next_seq: u64,
}

struct Live {
    /// Which connection this is.
    number: u64,
    commands: mpsc::UnboundedSender<Command>,
}

#[derive(Default)]
struct Inner {
    session: Option<Session>,
    live: Option<Live>,
    connections: u64,
    next_id: u64,
    sent: Vec<Sent>,
    typing: Vec<String>,
    /// Every REST call: method and path, and body.
    calls: Vec<(String, Value)>,
    /// 429s to answer on the next message posts: the `retry_after` of each, in seconds.
    limited: VecDeque<f64>,
    /// 429s answered.
    limits_served: u32,
    /// The message bucket per channel: size and window.
    bucket: (u32, Duration),
    windows: std::collections::HashMap<String, (Instant, u32)>,
    identifies: u32,
    resumes: u32,
    heartbeats: u32,
    acking: bool,
    /// The close codes clients sent.
    closes: Vec<u16>,
    heartbeat_ms: u64,
}

#[derive(Clone)]
struct Shared {
    token: String,
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == format!("Bot {}", self.token))
    }

    fn snowflake(&self) -> String {
        let mut inner = self.lock();
        inner.next_id += 1;
        (1_100_000_000_000_000_000 + inner.next_id).to_string()
    }
}

/// The fake; stops when dropped.
pub struct FakeDiscord {
    shared: Shared,
    _stop: oneshot::Sender<()>,
}

impl FakeDiscord {
    /// Starts it for the bot whose token is `token`.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start(token: &str) -> FakeDiscord {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("FakeDiscord: cannot bind a loopback port: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("FakeDiscord: no local address: {e}"));
        let shared = Shared {
            token: token.to_owned(),
            addr,
            inner: Arc::new(Mutex::new(Inner {
                bucket: (50, Duration::from_secs(1)),
                acking: true,
                heartbeat_ms: 41_250,
                ..Inner::default()
            })),
        };
        let app = Router::new()
            .route("/api/v10/users/@me", axum::routing::get(me))
            .route(
                "/api/v10/oauth2/applications/@me",
                axum::routing::get(application),
            )
            .route("/api/v10/gateway", axum::routing::get(gateway_url))
            .route("/api/v10/gateway/bot", axum::routing::get(gateway_url))
            .route(
                "/api/v10/channels/{channel}/messages",
                axum::routing::post(create_message),
            )
            .route(
                "/api/v10/channels/{channel}/typing",
                axum::routing::post(typing),
            )
            .route("/gateway", axum::routing::get(gateway))
            .route("/gateway/", axum::routing::get(gateway))
            .with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = served.await {
                panic!("FakeDiscord: the server failed: {e}");
            }
        });
        FakeDiscord {
            shared,
            _stop: stop,
        }
    }

    /// The REST base URL (`api_url` in reef's configuration).
    pub fn api_url(&self) -> String {
        format!("http://{}/api/v10", self.shared.addr)
    }

    /// The gateway's URL (`gateway_url`; also what `GET /gateway/bot` names).
    pub fn gateway_url(&self) -> String {
        format!("ws://{}/gateway", self.shared.addr)
    }

    /// Heartbeats are asked for every `ms` milliseconds on connections opened from now on.
    pub fn set_heartbeat_interval(&self, ms: u64) {
        self.shared.lock().heartbeat_ms = ms;
    }

    /// Whether heartbeats are acknowledged (off: the connection looks like a zombie's).
    pub fn set_acking(&self, acking: bool) {
        self.shared.lock().acking = acking;
    }

    /// `user` (id, name) writes `content` to the bot in their DM channel; returns the
    /// channel's id and the message's.
    pub fn push_dm(&self, user: (&str, &str), content: &str) -> (String, String) {
        let channel = dm_channel(user.0);
        let id = self.push_message(&channel, None, user, content, json!({}));
        (channel, id)
    }

    /// `user` writes `content` in the guild channel `channel`, mentioning the bot when
    /// `mention` (as `<@BOT_ID>` at the start, as the client does); returns the message id.
    pub fn push_guild(
        &self,
        channel: &str,
        user: (&str, &str),
        content: &str,
        mention: bool,
    ) -> String {
        let (content, extra) = if mention {
            (
                format!("<@{BOT_ID}> {content}"),
                json!({"mentions": [bot_user()]}),
            )
        } else {
            (content.to_owned(), json!({}))
        };
        self.push_message(channel, Some(GUILD_ID), user, &content, extra)
    }

    /// `user` answers the message `to` (written by `to_author`) in a guild channel.
    pub fn push_reply(
        &self,
        channel: &str,
        user: (&str, &str),
        content: &str,
        to: &str,
        to_author: (&str, &str),
    ) -> String {
        let referenced = json!({
            "id": to, "channel_id": channel, "content": "", "type": 0,
            "author": user_json(to_author.0, to_author.1, to_author.0 == BOT_ID),
        });
        let extra = json!({"type": 19, "referenced_message": referenced,
                           "message_reference": {"message_id": to, "channel_id": channel}});
        self.push_message(channel, Some(GUILD_ID), user, content, extra)
    }

    /// Dispatches MESSAGE_CREATE for a message with `extra` fields; returns its id.
    fn push_message(
        &self,
        channel: &str,
        guild: Option<&str>,
        user: (&str, &str),
        content: &str,
        extra: Value,
    ) -> String {
        let id = self.shared.snowflake();
        let mut message = json!({
            "id": id, "channel_id": channel, "type": 0, "content": content,
            "author": user_json(user.0, user.1, false),
            "timestamp": "2026-11-28T12:00:00.000000+00:00", "edited_timestamp": null,
            "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
            "attachments": [], "embeds": [], "pinned": false, "flags": 0,
        });
        if let Some(guild) = guild {
            message["guild_id"] = json!(guild);
        }
        if let (Some(m), Some(extra)) = (message.as_object_mut(), extra.as_object()) {
            m.extend(extra.clone());
        }
        self.dispatch("MESSAGE_CREATE", message);
        id
    }

    /// Dispatches the event `name` with `data` in the current session (delivered now if a
    /// connection is live, else on RESUME); returns its sequence number.
    ///
    /// # Panics
    /// Without a session (nobody identified yet).
    pub fn dispatch(&self, name: &str, data: Value) -> u64 {
        let mut inner = self.shared.lock();
        let Some(session) = inner.session.as_mut() else {
            panic!("FakeDiscord: no session to dispatch {name} in");
        };
        let payload = session.add(name, data);
        let seq = session.next_seq - 1;
        if let Some(live) = &inner.live {
            let _gone = live.commands.send(Command::Send(payload));
        }
        seq
    }

    /// Sends RECONNECT (op 7) on the live connection.
    pub fn ask_reconnect(&self) {
        self.command(Command::Send(json!({"op": 7, "d": null})));
    }

    /// Sends INVALID_SESSION (op 9) on the live connection; a session that cannot be
    /// resumed is gone.
    pub fn invalidate_session(&self, resumable: bool) {
        if !resumable {
            self.shared.lock().session = None;
        }
        self.command(Command::Send(json!({"op": 9, "d": resumable})));
    }

    /// Closes the live connection with `code` (the session lives on).
    pub fn close_connection(&self, code: u16) {
        self.command(Command::Close(code, "closed by the test"));
    }

    fn command(&self, command: Command) {
        if let Some(live) = &self.shared.lock().live {
            let _gone = live.commands.send(command);
        }
    }

    /// The next message posts answer 429 with these `retry_after`s.
    pub fn limit_next(&self, retry_after: f64) {
        self.shared.lock().limited.push_back(retry_after);
    }

    /// Each channel's message bucket holds `size` posts per `window`; a post past it is
    /// answered 429.
    pub fn set_bucket(&self, size: u32, window: Duration) {
        self.shared.lock().bucket = (size, window);
    }

    /// What the bot sent, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// Channels the bot showed typing in.
    pub fn typing(&self) -> Vec<String> {
        self.shared.lock().typing.clone()
    }

    /// Every REST call, with its body.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.shared.lock().calls.clone()
    }

    /// 429s answered so far.
    pub fn limits_served(&self) -> u32 {
        self.shared.lock().limits_served
    }

    /// IDENTIFYs and RESUMEs accepted, heartbeats received.
    pub fn identifies(&self) -> u32 {
        self.shared.lock().identifies
    }
    pub fn resumes(&self) -> u32 {
        self.shared.lock().resumes
    }
    pub fn heartbeats(&self) -> u32 {
        self.shared.lock().heartbeats
    }

    /// Whether a logged-in connection is live.
    pub fn connected(&self) -> bool {
        self.shared.lock().live.is_some()
    }

    /// The close codes clients sent.
    pub fn closes(&self) -> Vec<u16> {
        self.shared.lock().closes.clone()
    }

    /// Waits until the bot sent at least `n` messages; returns them.
    ///
    /// # Panics
    /// After about a minute without them.
    pub async fn wait_sent(&self, n: usize) -> Vec<Sent> {
        self.wait(|f| f.sent().len() >= n, &format!("{n} messages sent"))
            .await;
        self.sent()
    }

    /// Waits until `check` holds.
    ///
    /// # Panics
    /// After about a minute without it.
    pub async fn wait(&self, check: impl Fn(&FakeDiscord) -> bool, what: &str) {
        for _ in 0..6000 {
            if check(self) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("FakeDiscord: never saw {what}; sent {:#?}", self.sent());
    }
}

impl Session {
    fn add(&mut self, name: &str, data: Value) -> Value {
        let seq = self.next_seq;
        self.next_seq += 1;
        let data = self.visible(data);
        let payload = json!({"op": 0, "s": seq, "t": name, "d": data});
        self.log.push((seq, payload.clone()));
        payload
    }

    /// Without MESSAGE_CONTENT, a guild message that does not mention the bot comes with
    /// its content empty, as on Discord.
    fn visible(&self, mut data: Value) -> Value {
        let guild = data.get("guild_id").is_some();
        let mentioned = data["mentions"]
            .as_array()
            .is_some_and(|m| m.iter().any(|u| u["id"] == BOT_ID));
        if guild
            && !mentioned
            && self.intents & MESSAGE_CONTENT == 0
            && data.get("content").is_some()
        {
            data["content"] = json!("");
        }
        data
    }
}

/// A DM channel's id for `user`.
pub fn dm_channel(user: &str) -> String {
    format!("5{user}")
}

fn user_json(id: &str, name: &str, bot: bool) -> Value {
    json!({"id": id, "username": name, "discriminator": "0", "global_name": name,
           "avatar": null, "bot": bot, "public_flags": 0})
}

fn bot_user() -> Value {
    user_json(BOT_ID, BOT_NAME, true)
}

fn json_response(status: StatusCode, body: Value) -> Response {
    // Exactly `application/json`: discord.py reads nothing else as JSON.
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn unauthorized() -> Response {
    json_response(
        StatusCode::UNAUTHORIZED,
        json!({"message": "401: Unauthorized", "code": 0}),
    )
}

async fn me(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    shared
        .lock()
        .calls
        .push(("GET /users/@me".into(), Value::Null));
    if !shared.authorized(&headers) {
        return unauthorized();
    }
    let mut user = bot_user();
    user["verified"] = json!(true);
    user["flags"] = json!(0);
    user["mfa_enabled"] = json!(false);
    json_response(StatusCode::OK, user)
}

async fn application(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    if !shared.authorized(&headers) {
        return unauthorized();
    }
    json_response(
        StatusCode::OK,
        json!({"id": "100000000000000001", "name": "reef", "description": "", "icon": null,
               "bot_public": false, "bot_require_code_grant": false, "flags": 0,
               "owner": user_json("200000000000000001", "owner", false), "verify_key": "k"}),
    )
}

async fn gateway_url(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    shared
        .lock()
        .calls
        .push(("GET /gateway/bot".into(), Value::Null));
    if !shared.authorized(&headers) {
        return unauthorized();
    }
    json_response(
        StatusCode::OK,
        json!({"url": format!("ws://{}/gateway", shared.addr), "shards": 1,
               "session_start_limit": {"total": 1000, "remaining": 999,
                                       "reset_after": 14_400_000, "max_concurrency": 1}}),
    )
}

async fn typing(
    State(shared): State<Shared>,
    Path(channel): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !shared.authorized(&headers) {
        return unauthorized();
    }
    shared.lock().typing.push(channel);
    StatusCode::NO_CONTENT.into_response()
}

async fn create_message(
    State(shared): State<Shared>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if !shared.authorized(&headers) {
        return unauthorized();
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut inner = shared.lock();
    inner
        .calls
        .push((format!("POST /channels/{channel}/messages"), body.clone()));
    let too_many = |retry_after: f64, inner: &mut Inner| {
        inner.limits_served += 1;
        let mut response = json_response(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"message": "You are being rate limited.", "retry_after": retry_after,
                   "global": false}),
        );
        let headers = response.headers_mut();
        for (name, value) in [
            ("via", "1.1 google".to_owned()),
            ("retry-after", format!("{}", retry_after.ceil())),
            ("x-ratelimit-scope", "user".to_owned()),
        ] {
            if let Ok(value) = value.parse() {
                headers.insert(name, value);
            }
        }
        response
    };
    if let Some(retry_after) = inner.limited.pop_front() {
        return too_many(retry_after, &mut inner);
    }
    // The bucket: `size` posts per window per channel.
    let (size, window) = inner.bucket;
    let now = Instant::now();
    let (started, used) = inner
        .windows
        .get(&channel)
        .copied()
        .filter(|(started, _)| now.duration_since(*started) < window)
        .unwrap_or((now, 0));
    if used >= size {
        let left = window
            .saturating_sub(now.duration_since(started))
            .as_secs_f64();
        return too_many(left, &mut inner);
    }
    inner.windows.insert(channel.clone(), (started, used + 1));
    let reset_after = window
        .saturating_sub(now.duration_since(started))
        .as_secs_f64();
    let content = body["content"].as_str().unwrap_or_default().to_owned();
    if content.is_empty() || content.chars().count() > MESSAGE_MAX {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"code": 50035, "message": "Invalid Form Body", "errors": {"content": {"_errors": [
                {"code": "BASE_TYPE_BAD_LENGTH", "message": "Must be between 1 and 2000 in length."}]}}}),
        );
    }
    inner.next_id += 1;
    let id = (1_200_000_000_000_000_000 + inner.next_id).to_string();
    inner.sent.push(Sent {
        channel_id: channel.clone(),
        content: content.clone(),
        id: id.clone(),
        body: body.clone(),
    });
    drop(inner);
    let message = json!({
        "id": id, "channel_id": channel, "author": bot_user(), "content": content,
        "timestamp": "2026-11-28T12:00:01.000000+00:00", "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [],
        "embeds": [], "pinned": false, "type": 0, "flags": 0, "nonce": body.get("nonce"),
    });
    let mut response = json_response(StatusCode::OK, message);
    let headers = response.headers_mut();
    for (name, value) in [
        ("x-ratelimit-bucket", "fake-messages".to_owned()),
        ("x-ratelimit-limit", size.to_string()),
        (
            "x-ratelimit-remaining",
            size.saturating_sub(used + 1).to_string(),
        ),
        ("x-ratelimit-reset-after", format!("{reset_after:.3}")),
    ] {
        if let Ok(value) = value.parse() {
            headers.insert(name, value);
        }
    }
    response
}

async fn gateway(State(shared): State<Shared>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| connection(shared, socket))
}

/// One gateway connection.
async fn connection(shared: Shared, mut socket: WebSocket) {
    let (commands, mut rx) = mpsc::unbounded_channel();
    let (number, interval) = {
        let mut inner = shared.lock();
        inner.connections += 1;
        (inner.connections, inner.heartbeat_ms)
    };
    let hello = json!({"op": 10, "d": {"heartbeat_interval": interval}, "s": null, "t": null});
    if socket
        .send(WsMessage::text(hello.to_string()))
        .await
        .is_err()
    {
        return;
    }
    let mut logged_in = false;
    loop {
        let incoming = tokio::select! {
            command = rx.recv() => match command {
                Some(Command::Send(payload)) => {
                    if socket.send(WsMessage::text(payload.to_string())).await.is_err() {
                        break;
                    }
                    continue;
                }
                Some(Command::Close(code, reason)) => {
                    let frame = CloseFrame { code, reason: reason.into() };
                    let _gone = socket.send(WsMessage::Close(Some(frame))).await;
                    break;
                }
                None => break,
            },
            incoming = socket.recv() => incoming,
        };
        let text = match incoming {
            Some(Ok(WsMessage::Text(text))) => text.to_string(),
            Some(Ok(WsMessage::Close(frame))) => {
                let code = frame.as_ref().map_or(1005, |f| f.code);
                let mut inner = shared.lock();
                inner.closes.push(code);
                // A client that closes with 1000 or 1001 ends its session.
                if matches!(code, 1000 | 1001) && logged_in {
                    inner.session = None;
                }
                break;
            }
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => break,
        };
        let Ok(payload) = serde_json::from_str::<Value>(&text) else {
            let frame = CloseFrame {
                code: 4002,
                reason: "Error while decoding payload.".into(),
            };
            let _gone = socket.send(WsMessage::Close(Some(frame))).await;
            break;
        };
        let reply: Vec<Value> = match payload["op"].as_u64() {
            Some(1) => {
                let mut inner = shared.lock();
                inner.heartbeats += 1;
                if inner.acking {
                    vec![json!({"op": 11})]
                } else {
                    Vec::new()
                }
            }
            Some(2) => {
                if payload["d"]["token"] != shared.token.as_str() {
                    let frame = CloseFrame {
                        code: 4004,
                        reason: "Authentication failed.".into(),
                    };
                    let _gone = socket.send(WsMessage::Close(Some(frame))).await;
                    break;
                }
                let intents = payload["d"]["intents"].as_u64().unwrap_or(0);
                let mut inner = shared.lock();
                inner.identifies += 1;
                let mut session = Session {
                    id: format!("session-{}", inner.identifies),
                    intents,
                    log: Vec::new(),
                    next_seq: 1,
                };
                let ready = session.add(
                    "READY",
                    json!({"v": 10, "user": bot_user(), "guilds": [], "session_id": session.id,
                           "resume_gateway_url": format!("ws://{}/gateway", shared.addr),
                           "application": {"id": "100000000000000001", "flags": 0}}),
                );
                inner.session = Some(session);
                inner.live = Some(Live {
                    number,
                    commands: commands.clone(),
                });
                logged_in = true;
                vec![ready]
            }
            Some(6) => {
                let d = &payload["d"];
                let mut inner = shared.lock();
                let known = inner.session.as_ref().is_some_and(|s| {
                    d["token"] == shared.token.as_str() && d["session_id"] == s.id.as_str()
                });
                if known {
                    inner.resumes += 1;
                    let after = d["seq"].as_u64().unwrap_or(0);
                    let Some(session) = inner.session.as_mut() else {
                        break;
                    };
                    let mut replay: Vec<Value> = session
                        .log
                        .iter()
                        .filter(|(seq, _)| *seq > after)
                        .map(|(_, p)| p.clone())
                        .collect();
                    replay.push(session.add("RESUMED", json!({})));
                    inner.live = Some(Live {
                        number,
                        commands: commands.clone(),
                    });
                    logged_in = true;
                    replay
                } else {
                    vec![json!({"op": 9, "d": false})]
                }
            }
            _ => Vec::new(),
        };
        for payload in reply {
            if socket
                .send(WsMessage::text(payload.to_string()))
                .await
                .is_err()
            {
                break;
            }
        }
    }
    let mut inner = shared.lock();
    if inner.live.as_ref().is_some_and(|l| l.number == number) {
        inner.live = None;
    }
}
