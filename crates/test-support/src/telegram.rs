//! A fake Telegram Bot API on loopback, following the documented wire format: methods at
//! `/bot<TOKEN>/<method>` taking JSON, form or query parameters (as the official libraries
//! send them) and answering `{"ok": true, "result": …}` or `{"ok": false, "error_code",
//! "description", "parameters"}`; `getUpdates` is a real long poll whose `offset` confirms
//! (forgets) earlier updates; `sendMessage` refuses texts over 4,096 UTF-16 units and
//! entities outside the text; files at `/file/bot<TOKEN>/<path>`; a webhook set with
//! `setWebhook` receives each update with the secret token and gets it again until it answers
//! 200. A test pushes what people write, reads what the bot sent, and can make the next call
//! of a method answer 429 with `retry_after`. Its answers are checked by running the
//! python-telegram-bot library against it.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};

/// The bot's user id and username.
pub const BOT_ID: i64 = 7_000_001;
pub const BOT_USERNAME: &str = "reef_test_bot";
/// The longest message text, in UTF-16 units.
const MESSAGE_MAX: usize = 4096;

/// A message the bot sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    pub chat_id: i64,
    pub text: String,
    pub entities: Vec<Value>,
    pub message_id: i64,
}

#[derive(Default)]
struct Inner {
    /// Updates not yet confirmed, oldest first.
    updates: Vec<Value>,
    next_update: i64,
    next_message: i64,
    sent: Vec<Sent>,
    actions: Vec<(i64, String)>,
    /// Every call: method and parameters.
    calls: Vec<(String, Value)>,
    /// 429s to answer, per method: the `retry_after` of each.
    limited: HashMap<String, Vec<u64>>,
    files: HashMap<String, Vec<u8>>,
    webhook: Option<(String, Option<String>)>,
    /// Webhook deliveries answered 200, by update id.
    delivered: Vec<i64>,
    /// Every update pushed, by id.
    history: HashMap<i64, Value>,
}

#[derive(Clone)]
struct Shared {
    token: String,
    inner: Arc<Mutex<Inner>>,
    arrived: Arc<Notify>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The fake Bot API; stops when dropped.
pub struct FakeTelegram {
    addr: SocketAddr,
    shared: Shared,
    _stop: oneshot::Sender<()>,
}

impl FakeTelegram {
    /// Starts it for the bot whose token is `token`.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start(token: &str) -> FakeTelegram {
        let shared = Shared {
            token: token.to_owned(),
            inner: Arc::new(Mutex::new(Inner {
                next_update: 100,
                next_message: 1,
                ..Inner::default()
            })),
            arrived: Arc::new(Notify::new()),
        };
        let app = Router::new()
            .route("/{bot}/{method}", axum::routing::any(method))
            .route("/file/{bot}/{*path}", axum::routing::get(file))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("FakeTelegram: cannot bind a loopback port: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("FakeTelegram: no local address: {e}"));
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(e) = served.await {
                panic!("FakeTelegram: the server failed: {e}");
            }
        });
        let fake = FakeTelegram {
            addr,
            shared,
            _stop: stop,
        };
        fake.spawn_webhook_sender();
        fake
    }

    /// The base URL (`api_url` in reef's configuration).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Someone writes `text` in `chat` (private when `chat` is the user's own id, else a
    /// group); returns the update id.
    pub fn push_text(&self, chat: i64, user: (i64, &str), text: &str) -> i64 {
        self.push_message(chat, user, json!({"text": text}))
    }

    /// Someone sends a photo of `bytes` with `caption` in `chat`; returns the update id.
    pub fn push_photo(&self, chat: i64, user: (i64, &str), bytes: &[u8], caption: &str) -> i64 {
        let id = format!("photo{}", self.shared.lock().files.len() + 1);
        self.shared.lock().files.insert(id.clone(), bytes.to_vec());
        let small = json!({"file_id": format!("{id}s"), "file_unique_id": format!("u{id}s"),
                           "width": 90, "height": 90, "file_size": 10});
        let large = json!({"file_id": id, "file_unique_id": format!("u{id}"),
                           "width": 800, "height": 600, "file_size": bytes.len()});
        self.push_message(
            chat,
            user,
            json!({"photo": [small, large], "caption": caption}),
        )
    }

    /// Pushes an update whose message has `fields` (besides id, date, chat and sender).
    pub fn push_message(&self, chat: i64, user: (i64, &str), fields: Value) -> i64 {
        let mut inner = self.shared.lock();
        let (update_id, message_id) = (inner.next_update, inner.next_message);
        inner.next_update += 1;
        inner.next_message += 1;
        let kind = if chat == user.0 {
            "private"
        } else {
            "supergroup"
        };
        let mut message = json!({
            "message_id": message_id,
            "date": 1_700_000_000,
            "chat": {"id": chat, "type": kind, "title": "reef group"},
            "from": {"id": user.0, "is_bot": false, "first_name": user.1, "username": user.1},
        });
        if let (Some(m), Some(extra)) = (message.as_object_mut(), fields.as_object()) {
            m.extend(extra.clone());
        }
        let update = json!({"update_id": update_id, "message": message});
        inner.history.insert(update_id, update.clone());
        inner.updates.push(update);
        drop(inner);
        self.shared.arrived.notify_waiters();
        update_id
    }

    /// Pushes a whole update as given (an update of a kind reef does not handle, say).
    pub fn push_raw(&self, mut update: Value) -> i64 {
        let mut inner = self.shared.lock();
        let id = inner.next_update;
        inner.next_update += 1;
        update["update_id"] = json!(id);
        inner.history.insert(id, update.clone());
        inner.updates.push(update);
        drop(inner);
        self.shared.arrived.notify_waiters();
        id
    }

    /// Offers update `id` again, as the platform does with one whose offset was never
    /// confirmed (reef stopped after handling it and before keeping its place).
    pub fn redeliver(&self, id: i64) {
        let mut inner = self.shared.lock();
        if let Some(update) = inner.history.get(&id).cloned() {
            inner.updates.insert(0, update);
        }
        drop(inner);
        self.shared.arrived.notify_waiters();
    }

    /// The next call of `method` answers 429 with `retry_after` seconds.
    pub fn limit_next(&self, method: &str, retry_after: u64) {
        self.shared
            .lock()
            .limited
            .entry(method.to_owned())
            .or_default()
            .push(retry_after);
    }

    /// What the bot sent, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// The chat actions (`typing`) the bot showed.
    pub fn actions(&self) -> Vec<(i64, String)> {
        self.shared.lock().actions.clone()
    }

    /// Every call made, with its parameters.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.shared.lock().calls.clone()
    }

    /// Update ids whose webhook delivery was answered 200.
    pub fn delivered(&self) -> Vec<i64> {
        self.shared.lock().delivered.clone()
    }

    /// Updates not yet confirmed by an offset (or a webhook's 200).
    pub fn pending(&self) -> usize {
        self.shared.lock().updates.len()
    }

    /// Waits until the bot sent at least `n` messages; returns them.
    ///
    /// # Panics
    /// After about a minute without them.
    pub async fn wait_sent(&self, n: usize) -> Vec<Sent> {
        for _ in 0..6000 {
            let sent = self.sent();
            if sent.len() >= n {
                return sent;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "the bot sent {} messages, not {n}: {:#?}",
            self.sent().len(),
            self.sent()
        );
    }

    /// Posts each pending update to the webhook, when one is set, until it answers 200.
    fn spawn_webhook_sender(&self) {
        let shared = self.shared.clone();
        tokio::spawn(async move {
            loop {
                let next = {
                    let inner = shared.lock();
                    match (&inner.webhook, inner.updates.first()) {
                        (Some((url, secret)), Some(update)) => {
                            Some((url.clone(), secret.clone(), update.clone()))
                        }
                        _ => None,
                    }
                };
                let Some((url, secret, update)) = next else {
                    tokio::select! {
                        () = shared.arrived.notified() => {}
                        () = tokio::time::sleep(Duration::from_millis(50)) => {}
                    }
                    continue;
                };
                let ok = post(&url, &update, secret.as_deref()).await == Some(200);
                if ok {
                    let id = update["update_id"].as_i64().unwrap_or_default();
                    let mut inner = shared.lock();
                    inner
                        .updates
                        .retain(|u| u["update_id"].as_i64() != Some(id));
                    inner.delivered.push(id);
                } else {
                    // As the platform does: wait, then deliver the same update again.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
    }
}

/// POSTs `body` to an `http://` `url` (HTTP/1.1, one request per connection) and returns the
/// answer's status.
async fn post(url: &str, body: &Value, secret: Option<&str>) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.split_once('/') {
        Some((authority, path)) => (authority, format!("/{path}")),
        None => (rest, "/".to_owned()),
    };
    let body = body.to_string();
    let secret = secret
        .map(|s| format!("X-Telegram-Bot-Api-Secret-Token: {s}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n{secret}\r\n",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(authority).await.ok()?;
    stream.write_all(head.as_bytes()).await.ok()?;
    stream.write_all(body.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(70), stream.read_to_end(&mut answer))
        .await
        .ok()?
        .ok()?;
    let status = String::from_utf8_lossy(&answer);
    status.split(' ').nth(1)?.parse().ok()
}

fn ok(result: Value) -> Response {
    axum::Json(json!({"ok": true, "result": result})).into_response()
}

fn error(code: u16, description: &str, parameters: Option<Value>) -> Response {
    let mut body = json!({"ok": false, "error_code": code, "description": description});
    if let Some(p) = parameters {
        body["parameters"] = p;
    }
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    (status, axum::Json(body)).into_response()
}

/// The parameters of a call: the query, then a JSON or form body (a form value is JSON when it
/// reads as JSON, as the libraries encode lists and objects).
fn parameters(uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Map<String, Value> {
    let mut params = Map::new();
    let form = |text: &str, params: &mut Map<String, Value>| {
        let uri: Uri = format!("/?{text}").parse().unwrap_or_default();
        if let Ok(Query(pairs)) = Query::<Vec<(String, String)>>::try_from_uri(&uri) {
            for (k, v) in pairs {
                let value = serde_json::from_str(&v).unwrap_or(Value::String(v));
                params.insert(k, value);
            }
        }
    };
    if let Some(query) = uri.query() {
        form(query, &mut params);
    }
    let kind = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if kind.starts_with("application/json") {
        if let Ok(Value::Object(map)) = serde_json::from_slice(body) {
            params.extend(map);
        }
    } else if kind.starts_with("application/x-www-form-urlencoded") {
        form(&String::from_utf8_lossy(body), &mut params);
    }
    params
}

async fn method(
    State(s): State<Shared>,
    Path((bot, method)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if bot.strip_prefix("bot") != Some(s.token.as_str()) {
        return error(401, "Unauthorized", None);
    }
    let params = parameters(&uri, &headers, &body);
    {
        let mut inner = s.lock();
        inner
            .calls
            .push((method.clone(), Value::Object(params.clone())));
        if let Some(waits) = inner.limited.get_mut(&method)
            && !waits.is_empty()
        {
            let retry_after = waits.remove(0);
            return error(
                429,
                &format!("Too Many Requests: retry after {retry_after}"),
                Some(json!({"retry_after": retry_after})),
            );
        }
    }
    let int = |key: &str| {
        params
            .get(key)
            .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
    };
    match method.as_str() {
        "getMe" => ok(json!({"id": BOT_ID, "is_bot": true, "first_name": "reef",
                             "username": BOT_USERNAME, "can_join_groups": true,
                             "can_read_all_group_messages": false,
                             "supports_inline_queries": false})),
        "getUpdates" => {
            get_updates(&s, int("offset"), int("timeout").unwrap_or(0), int("limit")).await
        }
        "sendMessage" => send_message(&s, &params, int("chat_id")),
        "sendChatAction" => {
            let action = params
                .get("action")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match int("chat_id") {
                Some(chat) => {
                    s.lock().actions.push((chat, action.to_owned()));
                    ok(json!(true))
                }
                None => error(400, "Bad Request: chat_id is empty", None),
            }
        }
        "getFile" => {
            let id = params
                .get("file_id")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let size = s.lock().files.get(id).map(Vec::len);
            match size {
                Some(size) => ok(json!({"file_id": id, "file_unique_id": format!("u{id}"),
                                        "file_size": size, "file_path": format!("photos/{id}.jpg")})),
                None => error(400, "Bad Request: invalid file_id", None),
            }
        }
        "setWebhook" => {
            let url = params
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let secret = params
                .get("secret_token")
                .and_then(Value::as_str)
                .map(str::to_owned);
            s.lock().webhook = (!url.is_empty()).then(|| (url.to_owned(), secret));
            s.arrived.notify_waiters();
            ok(json!(true))
        }
        "deleteWebhook" => {
            s.lock().webhook = None;
            ok(json!(true))
        }
        other => error(404, &format!("Not Found: method {other} not found"), None),
    }
}

async fn get_updates(
    s: &Shared,
    offset: Option<i64>,
    timeout: i64,
    limit: Option<i64>,
) -> Response {
    if s.lock().webhook.is_some() {
        return error(
            409,
            "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
            None,
        );
    }
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs(timeout.clamp(0, 50).unsigned_abs());
    loop {
        let arrived = s.arrived.notified();
        let found: Vec<Value> = {
            let mut inner = s.lock();
            if let Some(offset) = offset {
                // An offset confirms every earlier update: they are forgotten.
                inner
                    .updates
                    .retain(|u| u["update_id"].as_i64().is_some_and(|id| id >= offset));
            }
            let limit = usize::try_from(limit.unwrap_or(100).clamp(1, 100)).unwrap_or(100);
            inner.updates.iter().take(limit).cloned().collect()
        };
        if !found.is_empty() || tokio::time::Instant::now() >= deadline {
            return ok(Value::Array(found));
        }
        tokio::select! {
            () = arrived => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

fn send_message(s: &Shared, params: &Map<String, Value>, chat: Option<i64>) -> Response {
    let Some(chat_id) = chat else {
        return error(400, "Bad Request: chat_id is empty", None);
    };
    let text = params
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let units: usize = text.chars().map(char::len_utf16).sum();
    if text.trim().is_empty() {
        return error(400, "Bad Request: message text is empty", None);
    }
    if units > MESSAGE_MAX {
        return error(400, "Bad Request: message is too long", None);
    }
    let entities = params
        .get("entities")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for e in &entities {
        let (Some(offset), Some(length)) = (e["offset"].as_u64(), e["length"].as_u64()) else {
            return error(
                400,
                "Bad Request: can't parse entities: offset or length missing",
                None,
            );
        };
        let end = usize::try_from(offset + length).unwrap_or(usize::MAX);
        if length == 0 || end > units {
            return error(
                400,
                &format!(
                    "Bad Request: can't parse entities: entity beyond the end of the text at offset {offset}"
                ),
                None,
            );
        }
        let known = [
            "bold",
            "italic",
            "underline",
            "strikethrough",
            "code",
            "pre",
            "text_link",
            "spoiler",
            "blockquote",
            "mention",
            "url",
        ];
        if !known.contains(&e["type"].as_str().unwrap_or_default()) {
            return error(
                400,
                "Bad Request: can't parse entities: unsupported entity type",
                None,
            );
        }
    }
    let mut inner = s.lock();
    let message_id = inner.next_message;
    inner.next_message += 1;
    inner.sent.push(Sent {
        chat_id,
        text: text.to_owned(),
        entities: entities.clone(),
        message_id,
    });
    let kind = if chat_id > 0 { "private" } else { "supergroup" };
    ok(json!({
        "message_id": message_id,
        "date": 1_700_000_100,
        "chat": {"id": chat_id, "type": kind},
        "from": {"id": BOT_ID, "is_bot": true, "first_name": "reef", "username": BOT_USERNAME},
        "text": text,
        "entities": entities,
    }))
}

async fn file(State(s): State<Shared>, Path((bot, path)): Path<(String, String)>) -> Response {
    if bot.strip_prefix("bot") != Some(s.token.as_str()) {
        return error(401, "Unauthorized", None);
    }
    let id = path
        .strip_prefix("photos/")
        .and_then(|p| p.strip_suffix(".jpg"))
        .unwrap_or_default();
    match s.lock().files.get(id) {
        Some(bytes) => Response::new(Body::from(bytes.clone())),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}
