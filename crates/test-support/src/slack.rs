//! A fake Slack on loopback, following the documented wire format: the Web API at
//! `/api/METHOD` (`Authorization: Bearer`, JSON or form bodies; `auth.test`,
//! `apps.connections.open` with the app-level token, `chat.postMessage` with the bot token;
//! `{"ok": false, "error"}` answers and 429s with `Retry-After`) and Socket Mode at `/link/`
//! (`hello`, `events_api` envelopes, acknowledgements by `envelope_id`, an unacknowledged
//! envelope delivered again after 3 s and on the next connection with its `retry_attempt`,
//! `disconnect` on demand). A message that mentions the bot in a channel comes twice, as a
//! `message` and as an `app_mention` event, as it does to an app subscribed to both. A test
//! pushes what people write and reads what the bot posted. Its answers are checked by
//! running the slack_sdk library against it.

use axum::Router;
use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// The bot's user id, bot id and team.
pub const BOT_USER: &str = "U0REEFBOT";
pub const BOT_ID: &str = "B0REEFBOT";
pub const TEAM_ID: &str = "T0REEF";
/// How long an envelope may go unacknowledged before Slack sends it again.
const ACK_WITHIN: Duration = Duration::from_secs(3);
/// The longest message text Slack takes.
const TEXT_MAX: usize = 40_000;

/// A message the bot posted.
#[derive(Clone, Debug, PartialEq)]
pub struct Posted {
    pub channel: String,
    pub text: String,
    pub thread_ts: Option<String>,
    pub ts: String,
    /// The request as it came.
    pub body: Value,
}

struct Envelope {
    id: String,
    payload: Value,
    /// Times sent so far.
    attempts: u32,
    /// When it was last sent, on which connection.
    sent: Option<(u64, Instant)>,
}

enum Command {
    Send(Value),
    Close,
}

struct Live {
    number: u64,
    commands: mpsc::UnboundedSender<Command>,
}

#[derive(Default)]
struct Inner {
    /// Envelopes not yet acknowledged, oldest first.
    pending: Vec<Envelope>,
    acked: Vec<String>,
    live: Option<Live>,
    connections: u64,
    opens: u32,
    next_ts: u64,
    next_envelope: u64,
    posted: Vec<Posted>,
    calls: Vec<(String, Value)>,
    limited: HashMap<String, VecDeque<u64>>,
    redeliveries: u32,
}

#[derive(Clone)]
struct Shared {
    bot_token: String,
    app_token: String,
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The fake; stops when dropped.
pub struct FakeSlack {
    shared: Shared,
    _stop: oneshot::Sender<()>,
}

impl FakeSlack {
    /// Starts it for the app whose bot token is `bot_token` and app-level token `app_token`.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start(bot_token: &str, app_token: &str) -> FakeSlack {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("FakeSlack: cannot bind a loopback port: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("FakeSlack: no local address: {e}"));
        let shared = Shared {
            bot_token: bot_token.to_owned(),
            app_token: app_token.to_owned(),
            addr,
            inner: Arc::new(Mutex::new(Inner {
                next_ts: 1,
                ..Inner::default()
            })),
        };
        let app = Router::new()
            .route("/api/{method}", axum::routing::post(method))
            .route("/link/", axum::routing::get(link))
            .route("/link", axum::routing::get(link))
            .with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = served.await {
                panic!("FakeSlack: the server failed: {e}");
            }
        });
        tokio::spawn(redeliver(shared.clone()));
        FakeSlack {
            shared,
            _stop: stop,
        }
    }

    /// The Web API's base URL (`api_url` in reef's configuration; slack_sdk wants a `/`
    /// after it).
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.shared.addr)
    }

    /// `user` writes `text` to the bot in their DM `channel` (`D…`); returns the message's
    /// `ts`.
    pub fn push_dm(&self, channel: &str, user: &str, text: &str) -> String {
        let ts = self.next_ts();
        let event = json!({"type": "message", "channel": channel, "user": user, "text": text,
                           "ts": ts, "event_ts": ts, "channel_type": "im"});
        self.push_event(event);
        ts
    }

    /// `user` writes `text` in `channel` (`C…`), in the thread `thread` when given;
    /// mentioning the bot (`<@BOT> ` first) when `mention`, which also sends `app_mention`.
    pub fn push_channel(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        mention: bool,
        thread: Option<&str>,
    ) -> String {
        let ts = self.next_ts();
        let text = if mention {
            format!("<@{BOT_USER}> {text}")
        } else {
            text.to_owned()
        };
        let mut event = json!({"type": "message", "channel": channel, "user": user,
                               "text": text, "ts": ts, "event_ts": ts,
                               "channel_type": "channel"});
        if let Some(thread) = thread {
            event["thread_ts"] = json!(thread);
        }
        self.push_event(event.clone());
        if mention {
            event["type"] = json!("app_mention");
            if let Some(e) = event.as_object_mut() {
                e.remove("channel_type");
            }
            self.push_event(event);
        }
        ts
    }

    /// Sends `event` wrapped as Slack does (an `event_callback` in an `events_api`
    /// envelope), now if a connection is live, else when one is.
    pub fn push_event(&self, event: Value) {
        let payload = event_callback(event);
        let mut inner = self.shared.lock();
        inner.next_envelope += 1;
        let id = format!("env-{}", inner.next_envelope);
        inner.pending.push(Envelope {
            id,
            payload,
            attempts: 0,
            sent: None,
        });
        drop(inner);
        send_pending(&self.shared);
    }

    fn next_ts(&self) -> String {
        let mut inner = self.shared.lock();
        inner.next_ts += 1;
        format!("1700000000.{:06}", inner.next_ts)
    }

    /// Sends `disconnect` with `reason` on the live connection (Slack's refresh).
    pub fn disconnect(&self, reason: &str) {
        let message = json!({"type": "disconnect", "reason": reason,
                             "debug_info": {"host": "fake-slack"}});
        if let Some(live) = &self.shared.lock().live {
            let _gone = live.commands.send(Command::Send(message));
        }
    }

    /// Drops the live connection without a word.
    pub fn close_connection(&self) {
        if let Some(live) = &self.shared.lock().live {
            let _gone = live.commands.send(Command::Close);
        }
    }

    /// The next call of `method` answers 429 with `Retry-After: retry_after`.
    pub fn limit_next(&self, method: &str, retry_after: u64) {
        self.shared
            .lock()
            .limited
            .entry(method.to_owned())
            .or_default()
            .push_back(retry_after);
    }

    /// What the bot posted, in order.
    pub fn posted(&self) -> Vec<Posted> {
        self.shared.lock().posted.clone()
    }

    /// Every Web API call, with its parameters.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.shared.lock().calls.clone()
    }

    /// Envelope ids acknowledged, in order.
    pub fn acked(&self) -> Vec<String> {
        self.shared.lock().acked.clone()
    }

    /// Envelopes not yet acknowledged.
    pub fn pending(&self) -> usize {
        self.shared.lock().pending.len()
    }

    /// `apps.connections.open` calls answered, and envelopes sent again.
    pub fn opens(&self) -> u32 {
        self.shared.lock().opens
    }
    pub fn redeliveries(&self) -> u32 {
        self.shared.lock().redeliveries
    }

    /// Whether a Socket Mode connection is live.
    pub fn connected(&self) -> bool {
        self.shared.lock().live.is_some()
    }

    /// Waits until the bot posted at least `n` messages; returns them.
    ///
    /// # Panics
    /// After about a minute without them.
    pub async fn wait_posted(&self, n: usize) -> Vec<Posted> {
        self.wait(|f| f.posted().len() >= n, &format!("{n} messages posted"))
            .await;
        self.posted()
    }

    /// Waits until `check` holds.
    ///
    /// # Panics
    /// After about a minute without it.
    pub async fn wait(&self, check: impl Fn(&FakeSlack) -> bool, what: &str) {
        for _ in 0..6000 {
            if check(self) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("FakeSlack: never saw {what}; posted {:#?}", self.posted());
    }
}

/// An `event_callback` payload around `event`, as the Events API posts it and Socket Mode
/// wraps it.
pub fn event_callback(event: Value) -> Value {
    let ts = event["event_ts"]
        .as_str()
        .unwrap_or("1700000000.000000")
        .to_owned();
    json!({"token": "verification-token", "team_id": TEAM_ID, "api_app_id": "A0REEF",
           "type": "event_callback", "event_id": format!("Ev{}", ts.replace('.', "")),
           "event_time": 1_700_000_000, "event": event,
           "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER, "is_bot": true}]})
}

/// Sends every envelope not yet sent on the live connection.
fn send_pending(shared: &Shared) {
    let mut inner = shared.lock();
    let Some((number, commands)) = inner.live.as_ref().map(|l| (l.number, l.commands.clone()))
    else {
        return;
    };
    for envelope in &mut inner.pending {
        if envelope.sent.is_some_and(|(on, _)| on == number) {
            continue;
        }
        let message = json!({
            "envelope_id": envelope.id, "type": "events_api",
            "accepts_response_payload": false, "retry_attempt": envelope.attempts,
            "retry_reason": if envelope.attempts == 0 { "" } else { "timeout" },
            "payload": envelope.payload,
        });
        envelope.attempts += 1;
        envelope.sent = Some((number, Instant::now()));
        let _gone = commands.send(Command::Send(message));
    }
}

/// Sends again what was not acknowledged in time.
async fn redeliver(shared: Shared) {
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let mut again = 0;
        {
            let mut inner = shared.lock();
            for envelope in &mut inner.pending {
                if envelope
                    .sent
                    .is_some_and(|(_, at)| at.elapsed() > ACK_WITHIN)
                {
                    envelope.sent = None;
                    again += 1;
                }
            }
            inner.redeliveries += again;
        }
        if again > 0 {
            send_pending(&shared);
        }
        if Arc::strong_count(&shared.inner) == 1 {
            return;
        }
    }
}

fn answer(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn not_ok(error: &str) -> Response {
    answer(StatusCode::OK, json!({"ok": false, "error": error}))
}

/// A request's parameters: a JSON body, or a form.
fn parameters(headers: &HeaderMap, body: &[u8]) -> Value {
    let json = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json {
        return serde_json::from_slice(body).unwrap_or(Value::Null);
    }
    let text = String::from_utf8_lossy(body);
    let mut map = Map::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        map.insert(decode(k), Value::String(decode(v)));
    }
    Value::Object(map)
}

/// Form decoding: `+` is a space, `%XX` a byte.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match text.get(i + 1..i + 3).map(|h| u8::from_str_radix(h, 16)) {
                    Some(Ok(b)) => {
                        out.push(b);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn method(
    State(shared): State<Shared>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let params = parameters(&headers, &body);
    let mut inner = shared.lock();
    inner.calls.push((method.clone(), params.clone()));
    if let Some(retry_after) = inner.limited.get_mut(&method).and_then(VecDeque::pop_front) {
        let mut response = answer(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"ok": false, "error": "ratelimited"}),
        );
        if let Ok(value) = retry_after.to_string().parse() {
            response.headers_mut().insert("retry-after", value);
        }
        return response;
    }
    match method.as_str() {
        "auth.test" => {
            if token != shared.bot_token {
                return not_ok("invalid_auth");
            }
            answer(
                StatusCode::OK,
                json!({"ok": true, "url": "https://reef-test.slack.com/", "team": "reef",
                       "user": "reef", "team_id": TEAM_ID, "user_id": BOT_USER,
                       "bot_id": BOT_ID, "is_enterprise_install": false}),
            )
        }
        "apps.connections.open" => {
            if token != shared.app_token {
                return not_ok(if token == shared.bot_token {
                    "not_allowed_token_type"
                } else {
                    "invalid_auth"
                });
            }
            inner.opens += 1;
            let url = format!("ws://{}/link/?ticket=t{}", shared.addr, inner.opens);
            answer(StatusCode::OK, json!({"ok": true, "url": url}))
        }
        "chat.postMessage" => {
            if token != shared.bot_token {
                return not_ok("invalid_auth");
            }
            let channel = params["channel"].as_str().unwrap_or_default().to_owned();
            let text = params["text"].as_str().unwrap_or_default().to_owned();
            if channel.is_empty() {
                return not_ok("channel_not_found");
            }
            if text.is_empty() {
                return not_ok("no_text");
            }
            if text.chars().count() > TEXT_MAX {
                return not_ok("msg_too_long");
            }
            inner.next_ts += 1;
            let ts = format!("1700000000.{:06}", inner.next_ts);
            let thread_ts = params["thread_ts"].as_str().map(str::to_owned);
            inner.posted.push(Posted {
                channel: channel.clone(),
                text: text.clone(),
                thread_ts: thread_ts.clone(),
                ts: ts.clone(),
                body: params.clone(),
            });
            let mut message = json!({"type": "message", "user": BOT_USER, "bot_id": BOT_ID,
                                     "text": text, "ts": ts});
            if let Some(thread) = thread_ts {
                message["thread_ts"] = json!(thread);
            }
            answer(
                StatusCode::OK,
                json!({"ok": true, "channel": channel, "ts": ts, "message": message}),
            )
        }
        _ => not_ok("unknown_method"),
    }
}

async fn link(State(shared): State<Shared>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| connection(shared, socket))
}

/// One Socket Mode connection.
async fn connection(shared: Shared, mut socket: WebSocket) {
    let (commands, mut rx) = mpsc::unbounded_channel();
    let number = {
        let mut inner = shared.lock();
        inner.connections += 1;
        let number = inner.connections;
        // A newer connection takes the place of an older one.
        inner.live = Some(Live {
            number,
            commands: commands.clone(),
        });
        number
    };
    let hello = json!({"type": "hello", "num_connections": 1,
                       "debug_info": {"host": "fake-slack", "build_number": 1,
                                      "approximate_connection_time": 18060},
                       "connection_info": {"app_id": "A0REEF"}});
    if socket
        .send(WsMessage::text(hello.to_string()))
        .await
        .is_ok()
    {
        send_pending(&shared);
        loop {
            tokio::select! {
                command = rx.recv() => match command {
                    Some(Command::Send(message)) => {
                        if socket.send(WsMessage::text(message.to_string())).await.is_err() {
                            break;
                        }
                    }
                    Some(Command::Close) | None => break,
                },
                incoming = socket.recv() => match incoming {
                    Some(Ok(WsMessage::Text(text))) => {
                        let Ok(ack) = serde_json::from_str::<Value>(text.as_str()) else {
                            continue;
                        };
                        if let Some(id) = ack["envelope_id"].as_str() {
                            let mut inner = shared.lock();
                            let before = inner.pending.len();
                            inner.pending.retain(|e| e.id != id);
                            if inner.pending.len() < before {
                                inner.acked.push(id.to_owned());
                            }
                        }
                    }
                    Some(Ok(WsMessage::Ping(data))) => {
                        if socket.send(WsMessage::Pong(data)).await.is_err() {
                            break;
                        }
                    }
                    Some(Ok(WsMessage::Close(_))) | Some(Err(_)) | None => break,
                    Some(Ok(_)) => {}
                },
            }
        }
    }
    let mut inner = shared.lock();
    if inner.live.as_ref().is_some_and(|l| l.number == number) {
        inner.live = None;
    }
    // What this connection was sent and did not acknowledge goes on the next one.
    for envelope in &mut inner.pending {
        if envelope.sent.is_some_and(|(on, _)| on == number) {
            envelope.sent = None;
        }
    }
}
