//! One gateway connection: HELLO, then IDENTIFY (or RESUME with the session id and the last
//! sequence handled), then a task that keeps the heartbeat (the first at a random point of
//! the interval, so a fleet of clients does not beat in step) and hands every dispatch over
//! with its sequence number. A heartbeat that is not acknowledged before the next one is
//! due means a zombie connection: it is closed (as resumable) and reported. RECONNECT (op 7),
//! INVALID_SESSION (op 9) and close codes end the connection with whether the session can
//! be resumed.

use super::types::{Hello, Payload, op};
use super::{API_VERSION, INTENTS};
use crate::websocket::{self, Incoming, Socket};
use reef_core::ChannelError;
use serde_json::{Value, json};
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long the gateway may take to say HELLO.
const HELLO_WAIT: Duration = Duration::from_secs(30);
/// The close code reef uses when it leaves meaning to come back (not 1000 or 1001, which
/// end the session on Discord's side).
pub(super) const CLOSE_RESUMABLE: u16 = 4000;

/// What the connection hands over.
#[derive(Debug)]
pub(super) enum Event {
    Dispatch {
        seq: u64,
        name: String,
        data: Value,
    },
    /// The connection is over; `resumable` says whether the session lives on.
    Ended {
        error: ChannelError,
        resumable: bool,
    },
}

/// How to log in on a new connection.
pub(super) enum Login<'a> {
    Identify,
    Resume { session_id: &'a str, seq: u64 },
}

/// A live connection; dropping it drops the socket.
pub(super) struct Connection {
    pub events: mpsc::Receiver<Event>,
    task: JoinHandle<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Connection {
    /// Connects to the gateway at `url` and logs in with `token`.
    pub async fn open(
        url: &str,
        token: &str,
        login: Login<'_>,
    ) -> Result<Connection, ChannelError> {
        let address = gateway_address(url);
        let mut socket = websocket::open(&address).await?;
        let hello = match tokio::time::timeout(HELLO_WAIT, websocket::next(&mut socket)).await {
            Err(_) => {
                return Err(ChannelError::Connection(
                    "the Discord gateway said no HELLO in 30 s".into(),
                ));
            }
            Ok(incoming) => incoming?,
        };
        let interval = match hello {
            Incoming::Text(text) => {
                let payload: Payload = serde_json::from_str(&text).map_err(|e| {
                    ChannelError::Connection(format!(
                        "the gateway's first payload is not JSON: {e}"
                    ))
                })?;
                if payload.op != op::HELLO {
                    return Err(ChannelError::Connection(format!(
                        "the gateway began with op {} instead of HELLO",
                        payload.op
                    )));
                }
                let hello: Hello = serde_json::from_value(payload.d).map_err(|e| {
                    ChannelError::Connection(format!("the gateway's HELLO is not readable: {e}"))
                })?;
                // Discord's is about 41 s; anything below 100 ms is nonsense.
                Duration::from_millis(hello.heartbeat_interval.clamp(100, 600_000))
            }
            Incoming::Closed(code, reason) => return Err(closed(code, &reason).0),
        };
        let (first, seq) = match login {
            Login::Identify => (
                json!({"op": op::IDENTIFY, "d": {
                    "token": token,
                    "intents": INTENTS,
                    "properties": {"os": std::env::consts::OS, "browser": "reef", "device": "reef"},
                }}),
                None,
            ),
            Login::Resume { session_id, seq } => (
                json!({"op": op::RESUME, "d": {
                    "token": token, "session_id": session_id, "seq": seq,
                }}),
                Some(seq),
            ),
        };
        websocket::send(&mut socket, first.to_string()).await?;
        let (tx, events) = mpsc::channel(64);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(run(socket, interval, seq, tx, stopped));
        Ok(Connection {
            events,
            task,
            stop: Some(stop),
        })
    }

    /// Closes the connection as resumable (the session lives on for a later RESUME).
    pub async fn close(mut self) {
        if let Some(stop) = self.stop.take() {
            let _gone = stop.send(());
        }
        // The task closes the socket and ends; a stuck one is aborted on drop.
        let wait = tokio::time::timeout(Duration::from_secs(3), &mut self.task).await;
        if wait.is_err() {
            tracing::debug!("the gateway task did not end in time");
        }
    }
}

/// `url` with the version and encoding asked for: `wss://gateway.discord.gg/?v=10&…`, or
/// after the path a URL has (`ws://127.0.0.1:9000/gateway?v=10&…`); a query it had is
/// replaced.
fn gateway_address(url: &str) -> String {
    let url = url.split('?').next().unwrap_or(url);
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let slash = if after_scheme.contains('/') { "" } else { "/" };
    format!("{url}{slash}?v={API_VERSION}&encoding=json")
}

/// A random fraction in [0, 1), from the standard library's randomly seeded hasher.
pub(super) fn jitter() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0x5eed);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

async fn run(
    mut socket: Socket,
    interval: Duration,
    mut seq: Option<u64>,
    tx: mpsc::Sender<Event>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let mut next_beat = Instant::now() + interval.mul_f64(jitter());
    let mut acked = true;
    let end = |error, resumable| Event::Ended { error, resumable };
    let ended = loop {
        tokio::select! {
            _ = &mut stopped => {
                websocket::close(&mut socket, CLOSE_RESUMABLE, "reef is closing").await;
                return;
            }
            () = tokio::time::sleep_until(next_beat) => {
                if !acked {
                    websocket::close(&mut socket, CLOSE_RESUMABLE, "no heartbeat ACK").await;
                    break end(
                        ChannelError::Connection(
                            "the gateway acknowledged no heartbeat in time (a zombie connection)"
                                .into(),
                        ),
                        true,
                    );
                }
                if let Err(e) = beat(&mut socket, seq).await {
                    break end(e, true);
                }
                acked = false;
                next_beat += interval;
            }
            incoming = websocket::next(&mut socket) => {
                let text = match incoming {
                    Ok(Incoming::Text(text)) => text,
                    Ok(Incoming::Closed(code, reason)) => {
                        let (error, resumable) = closed(code, &reason);
                        break end(error, resumable);
                    }
                    Err(e) => break end(e, true),
                };
                let payload: Payload = match serde_json::from_str(&text) {
                    Ok(payload) => payload,
                    Err(e) => {
                        tracing::warn!(error = %e, "skipping a gateway payload that is not JSON");
                        continue;
                    }
                };
                match payload.op {
                    op::DISPATCH => {
                        let (Some(s), Some(name)) = (payload.s, payload.t) else {
                            tracing::warn!("skipping a dispatch without sequence or name");
                            continue;
                        };
                        seq = Some(seq.map_or(s, |old| old.max(s)));
                        let event = Event::Dispatch { seq: s, name, data: payload.d };
                        if tx.send(event).await.is_err() {
                            websocket::close(&mut socket, CLOSE_RESUMABLE, "reef is closing").await;
                            return;
                        }
                    }
                    op::HEARTBEAT => {
                        if let Err(e) = beat(&mut socket, seq).await {
                            break end(e, true);
                        }
                    }
                    op::HEARTBEAT_ACK => acked = true,
                    op::RECONNECT => {
                        websocket::close(&mut socket, CLOSE_RESUMABLE, "reconnecting").await;
                        break end(
                            ChannelError::Connection("the gateway asked for a reconnect".into()),
                            true,
                        );
                    }
                    op::INVALID_SESSION => {
                        let resumable = payload.d.as_bool().unwrap_or(false);
                        websocket::close(&mut socket, CLOSE_RESUMABLE, "invalid session").await;
                        break end(
                            ChannelError::Connection(format!(
                                "the gateway invalidated the session ({})",
                                if resumable { "resumable" } else { "a new one follows" }
                            )),
                            resumable,
                        );
                    }
                    op::HELLO => {}
                    other => tracing::debug!(op = other, "ignoring a gateway opcode"),
                }
            }
        }
    };
    let _gone = tx.send(ended).await;
}

async fn beat(socket: &mut Socket, seq: Option<u64>) -> Result<(), ChannelError> {
    websocket::send(socket, json!({"op": op::HEARTBEAT, "d": seq}).to_string()).await
}

/// What a close code means: the error, and whether the session can be resumed.
fn closed(code: u16, reason: &str) -> (ChannelError, bool) {
    let said = format!("the Discord gateway closed the connection ({code} {reason})");
    match code {
        4004 => (
            ChannelError::Refused(format!("{said}: the bot token was refused")),
            false,
        ),
        4014 => (
            ChannelError::Refused(format!(
                "{said}: enable the Message Content intent for the bot in the developer portal"
            )),
            false,
        ),
        4010..=4013 => (ChannelError::Refused(said), false),
        // An invalid sequence, or a session that timed out: identify anew.
        4007 | 4009 => (ChannelError::Connection(said), false),
        _ => (ChannelError::Connection(said), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_say_whether_to_resume() {
        assert!(matches!(closed(4004, "").0, ChannelError::Refused(_)));
        assert!(!closed(4004, "").1);
        assert!(closed(4000, "").1 && closed(1006, "").1 && closed(4008, "").1);
        assert!(!closed(4007, "").1 && !closed(4009, "").1);
        assert!(closed(4014, "").0.to_string().contains("Message Content"));
    }

    #[test]
    fn the_version_goes_after_the_path() {
        assert_eq!(
            gateway_address("wss://gateway.discord.gg"),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            gateway_address("ws://127.0.0.1:9/gateway?old=1"),
            "ws://127.0.0.1:9/gateway?v=10&encoding=json"
        );
    }

    #[test]
    fn jitter_is_a_fraction() {
        for _ in 0..100 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j), "{j}");
        }
    }
}
