//! One Socket Mode connection: the URL `apps.connections.open` gave, Slack's `hello`, then a
//! task that hands every envelope over and sends the acknowledgements the channel asks for.
//! A `disconnect` (Slack refreshes connections every few hours) or a close ends it; the
//! channel then opens a new one, and Slack delivers again what was not acknowledged.

use crate::websocket::{self, Incoming};
use reef_core::ChannelError;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long Slack may take to say hello.
const HELLO_WAIT: Duration = Duration::from_secs(30);

/// What the connection hands over.
#[derive(Debug)]
pub(super) enum SocketEvent {
    Envelope {
        id: String,
        kind: String,
        payload: Value,
    },
    Ended(ChannelError),
}

/// A live connection; dropping it drops the socket.
pub(super) struct Socket {
    pub events: mpsc::Receiver<SocketEvent>,
    acks: mpsc::UnboundedSender<String>,
    task: JoinHandle<()>,
}

impl Drop for Socket {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Socket {
    /// Connects to `url` and waits for `hello`.
    pub async fn open(url: &str) -> Result<Socket, ChannelError> {
        let mut socket = websocket::open(url).await?;
        loop {
            let first = tokio::time::timeout(HELLO_WAIT, websocket::next(&mut socket))
                .await
                .map_err(|_| ChannelError::Connection("Slack said no hello in 30 s".into()))??;
            match first {
                Incoming::Text(text) => {
                    let message: Value = serde_json::from_str(&text).map_err(|e| {
                        ChannelError::Connection(format!("Slack's first message is not JSON: {e}"))
                    })?;
                    match message["type"].as_str() {
                        Some("hello") => break,
                        Some("disconnect") => return Err(disconnected(&message)),
                        other => {
                            tracing::debug!(kind = ?other, "a Socket Mode message before hello")
                        }
                    }
                }
                Incoming::Closed(code, reason) => {
                    return Err(ChannelError::Connection(format!(
                        "Slack closed the connection ({code} {reason})"
                    )));
                }
            }
        }
        let (tx, events) = mpsc::channel(16);
        let (acks, acked) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(socket, tx, acked));
        Ok(Socket { events, acks, task })
    }

    /// Acknowledges the envelope `id`.
    pub fn ack(&self, id: String) {
        if self.acks.send(id).is_err() {
            tracing::debug!("the Socket Mode connection is gone; Slack delivers it again");
        }
    }
}

/// What a `disconnect` means: `link_disabled` is for good (Socket Mode was turned off for
/// the app), the others ask for a new connection.
fn disconnected(message: &Value) -> ChannelError {
    match message["reason"].as_str().unwrap_or("unknown") {
        "link_disabled" => {
            ChannelError::Refused("Socket Mode is turned off for this Slack app".into())
        }
        reason => ChannelError::Connection(format!("Slack asked for a new connection ({reason})")),
    }
}

async fn run(
    mut socket: websocket::Socket,
    tx: mpsc::Sender<SocketEvent>,
    mut acked: mpsc::UnboundedReceiver<String>,
) {
    let ended = loop {
        tokio::select! {
            id = acked.recv() => {
                let Some(id) = id else {
                    websocket::close(&mut socket, 1000, "reef is closing").await;
                    return;
                };
                let ack = json!({"envelope_id": id}).to_string();
                if let Err(e) = websocket::send(&mut socket, ack).await {
                    break e;
                }
            }
            incoming = websocket::next(&mut socket) => {
                let text = match incoming {
                    Ok(Incoming::Text(text)) => text,
                    Ok(Incoming::Closed(code, reason)) => {
                        break ChannelError::Connection(format!(
                            "Slack closed the connection ({code} {reason})"
                        ));
                    }
                    Err(e) => break e,
                };
                let Ok(message) = serde_json::from_str::<Value>(&text) else {
                    tracing::warn!("skipping a Socket Mode message that is not JSON");
                    continue;
                };
                if message["type"] == "disconnect" {
                    websocket::close(&mut socket, 1000, "reconnecting").await;
                    break disconnected(&message);
                }
                let Some(id) = message["envelope_id"].as_str() else {
                    tracing::debug!(kind = ?message["type"], "a Socket Mode message without an envelope");
                    continue;
                };
                let event = SocketEvent::Envelope {
                    id: id.to_owned(),
                    kind: message["type"].as_str().unwrap_or_default().to_owned(),
                    payload: message["payload"].clone(),
                };
                if tx.send(event).await.is_err() {
                    websocket::close(&mut socket, 1000, "reef is closing").await;
                    return;
                }
            }
        }
    };
    let _gone = tx.send(SocketEvent::Ended(ended)).await;
}
