//! The terminal view, offered only when `[dashboard] terminal = true`: the page
//! (`GET /agents/{name}/terminal`, xterm.js) and its WebSocket
//! (`GET /agents/{name}/terminal/socket`) to a shell in the agent's sandbox. Typed input
//! arrives as binary frames and `{"resize":[cols,rows]}` as text; the shell's output leaves as
//! binary frames, and `{"exit":CODE}` says it ended. The socket needs the page's session,
//! its CSRF token and the daemon's own `Origin`.

use crate::Dash;
use crate::auth::{Session, same};
use crate::guard::Client;
use crate::view::{Chrome, page};
use askama::Template;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use reef_runtime::{TermSize, TerminalSession};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Terminals open at once in the whole daemon.
pub const MAX_TERMINALS: usize = 8;
/// Typed input held for a shell that is not reading; past it the socket is not read.
const MAX_PENDING_INPUT: usize = 64 * 1024;
/// The largest WebSocket message (and frame) a page may send.
const MAX_MESSAGE: usize = 64 * 1024;
/// How long the page may take to accept output before the session is ended.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// How often an open terminal checks that its sign-in still holds.
const SESSION_CHECK: Duration = Duration::from_secs(10);
/// The largest size a page may ask for.
const MAX_COLS: u16 = 500;
const MAX_ROWS: u16 = 200;

/// The page's policy: the one of every page, but xterm.js sets styles of its own.
const TERMINAL_CSP: &str = "default-src 'none'; script-src 'self'; \
                            style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                            connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                            base-uri 'none'";

#[derive(Template)]
#[template(path = "terminal.html")]
struct TerminalPage {
    chrome: Chrome,
    name: String,
}

/// `GET /agents/{name}/terminal`.
pub(crate) async fn terminal_page(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
    Path(name): Path<String>,
) -> Response {
    if !d.runtime.config().dashboard.terminal {
        return off();
    }
    if let Err(err) = d.runtime.get_agent(&name).await {
        return crate::pages::failure(&err);
    }
    let mut res = page(&TerminalPage {
        chrome: Chrome::new(
            format!("{name} · terminal · reef"),
            &session.csrf,
            "terminal",
        ),
        name,
    });
    res.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(TERMINAL_CSP),
    );
    res
}

fn off() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::response::Html(
            "<p class=\"notice error\" role=\"alert\">The terminal is off: set \
             <code>terminal = true</code> under <code>[dashboard]</code> in reef.toml and \
             restart the daemon.</p>",
        ),
    )
        .into_response()
}

#[derive(serde::Deserialize)]
pub(crate) struct SocketQuery {
    #[serde(default)]
    csrf: String,
    cols: Option<u16>,
    rows: Option<u16>,
}

/// `GET /agents/{name}/terminal/socket`: the shell, over a WebSocket.
pub(crate) async fn socket(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
    Extension(Client(client)): Extension<Client>,
    Path(name): Path<String>,
    Query(query): Query<SocketQuery>,
    headers: axum::http::HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    if !d.runtime.config().dashboard.terminal {
        return off();
    }
    // A foreign `Origin` was refused already; a socket without one is refused too (browsers
    // always send it), and the page's CSRF token must come along.
    if !headers.contains_key(header::ORIGIN) {
        return (StatusCode::FORBIDDEN, "a terminal needs the page's Origin").into_response();
    }
    if !same(query.csrf.as_bytes(), session.csrf.as_bytes()) {
        return (
            StatusCode::FORBIDDEN,
            "the request lacks this page's CSRF token",
        )
            .into_response();
    }
    let Some(slot) = Slot::take(&d.terminals) else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many terminals are open; close one and try again",
        )
            .into_response();
    };
    let size = TermSize::new(
        query.cols.unwrap_or(80).min(MAX_COLS),
        query.rows.unwrap_or(24).min(MAX_ROWS),
    );
    let by = format!("dashboard ({client})");
    let term = match d.runtime.open_terminal(&name, &by, size).await {
        Ok(term) => term,
        Err(err) => return crate::pages::failure(&err),
    };
    upgrade
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_upgrade(move |socket| async move {
            relay(d, session, term, socket).await;
            drop(slot);
        })
}

/// One of the [`MAX_TERMINALS`], given back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(open: &Arc<AtomicUsize>) -> Option<Slot> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_TERMINALS).then_some(n + 1)
        })
        .ok()
        .map(|_| Slot(open.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Carries bytes both ways until the shell exits, the page goes, the sign-in ends or the
/// daemon stops; then closes the session (which records it) and tells the page.
async fn relay(d: Dash, session: Session, term: TerminalSession, mut socket: WebSocket) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut pending: VecDeque<u8> = VecDeque::new();
    let mut check = tokio::time::interval(SESSION_CHECK);
    let mut stopping = d.runtime.stopping();
    let why = loop {
        let (front, _) = pending.as_slices();
        tokio::select! {
            read = term.read(&mut buf) => match read {
                Ok(0) => break "the shell exited",
                Ok(n) => {
                    let out = Message::Binary(buf[..n].to_vec().into());
                    match tokio::time::timeout(SEND_TIMEOUT, socket.send(out)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => break "the page closed",
                        Err(_) => break "the page stopped reading",
                    }
                }
                Err(err) => {
                    tracing::debug!(%err, "cannot read a terminal");
                    break "the shell exited";
                }
            },
            wrote = term.write(front), if !front.is_empty() => match wrote {
                Ok(n) => drop(pending.drain(..n)),
                Err(err) => {
                    tracing::debug!(%err, "cannot write to a terminal");
                    break "the shell exited";
                }
            },
            msg = socket.recv(), if pending.len() < MAX_PENDING_INPUT => match msg {
                Some(Ok(Message::Binary(data))) => pending.extend(data.iter()),
                Some(Ok(Message::Text(text))) => control(&term, text.as_str()),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => break "the page closed",
            },
            _ = check.tick() => {
                if d.logins.session(&session.id).is_none() {
                    break "the sign-in ended";
                }
            }
            // (Also when the stop began before this session: `changed` would miss it.)
            _ = async { stopping.wait_for(|stop| *stop).await.is_ok() } => {
                break "the daemon stopped";
            }
        }
    };
    let code = match term.close(why).await {
        Ok(code) => code,
        Err(err) => {
            tracing::warn!(%err, "cannot record the end of a terminal session");
            None
        }
    };
    let end = serde_json::json!({ "exit": code, "why": why });
    // The page may be gone already; nothing more to do then.
    if socket
        .send(Message::Text(end.to_string().into()))
        .await
        .is_ok()
    {
        let _closed = socket.send(Message::Close(None)).await;
    }
}

/// A text frame: `{"resize":[cols,rows]}`; anything else is ignored.
fn control(term: &TerminalSession, text: &str) {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    let size = value["resize"].as_array().and_then(|v| {
        let cols = u16::try_from(v.first()?.as_u64()?).ok()?;
        let rows = u16::try_from(v.get(1)?.as_u64()?).ok()?;
        Some(TermSize::new(cols.min(MAX_COLS), rows.min(MAX_ROWS)))
    });
    if let Some(size) = size
        && let Err(err) = term.resize(size)
    {
        tracing::debug!(%err, "cannot resize a terminal");
    }
}
