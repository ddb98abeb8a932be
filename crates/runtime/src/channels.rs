//! The channels' board: each configured channel's state as whoever runs it reports it, with
//! its reconnections and messages in and out, for the API and `reef channels status`. A
//! change of state is an event: `channel.up`, `channel.down` (with the error and when the
//! next attempt is). Also where a channel fed by webhook deliveries (a bot platform posting
//! to the daemon) receives them: the HTTP route finds the channel's [`ChannelHook`] here.

use crate::kernel::{Runtime, lock};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Mutex;
use tokio::sync::{mpsc, oneshot};

/// Where a channel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelState {
    /// Connecting (first time or again).
    Connecting,
    Up,
    /// Not connected; `next_attempt_unix` says when it tries again.
    Down,
    /// `enabled = false` in its table.
    Disabled,
}

impl std::fmt::Display for ChannelState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChannelState::Connecting => "connecting",
            ChannelState::Up => "up",
            ChannelState::Down => "down",
            ChannelState::Disabled => "disabled",
        })
    }
}

/// One channel as the board shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChannelStatus {
    /// The `[channels.NAME]` table's name.
    pub name: String,
    /// `irc`, …
    pub kind: String,
    /// Where it connects (`host:port`).
    pub target: String,
    pub state: ChannelState,
    /// Unix seconds since when it is in this state.
    pub since_unix: i64,
    /// Why it is down, or the last error while up.
    pub error: Option<String>,
    /// Failed attempts in a row.
    pub failures: u32,
    /// Unix seconds of the next attempt when down.
    pub next_attempt_unix: Option<i64>,
    /// reef's identities connected (the overseer and agents).
    pub connected: usize,
    /// Outbound lines waiting for flood control.
    pub queued: usize,
    /// Connections made after the first (the supervisor's reconnects).
    pub reconnects: u32,
    /// Messages received from people and handled, since the daemon started.
    pub messages_in: u64,
    /// Messages sent, since the daemon started.
    pub messages_out: u64,
}

/// A channel fed by webhook deliveries: the secret each delivery must carry, and where the
/// route hands it (with the acknowledgement it waits for before answering the platform).
#[derive(Clone, Debug)]
pub struct ChannelHook {
    /// Which platform's route takes the deliveries (and how the secret authenticates them).
    pub kind: HookKind,
    /// Telegram: the token each delivery carries; Slack: the key of each request's HMAC.
    pub secret: String,
    pub feed: mpsc::Sender<(serde_json::Value, oneshot::Sender<()>)>,
}

/// The platform a [`ChannelHook`] takes deliveries from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookKind {
    /// `POST /hooks/telegram/NAME`, with `X-Telegram-Bot-Api-Secret-Token`.
    Telegram,
    /// `POST /hooks/slack/NAME`, signed with the app's signing secret.
    Slack,
}

/// The board itself, one entry per configured channel.
#[derive(Debug, Default)]
pub(crate) struct Board {
    status: Mutex<BTreeMap<String, ChannelStatus>>,
    hooks: Mutex<BTreeMap<String, ChannelHook>>,
}

impl Runtime {
    /// Every configured channel's status, by name.
    pub fn channels(&self) -> Vec<ChannelStatus> {
        lock(&self.inner.channels.status)
            .values()
            .cloned()
            .collect()
    }

    /// Replaces a channel's status; a new state is recorded as an event.
    /// The counts of messages in and out are the board's own and kept.
    pub async fn report_channel(&self, mut status: ChannelStatus) {
        let previous = {
            let mut board = lock(&self.inner.channels.status);
            if let Some(before) = board.get(&status.name) {
                status.messages_in = before.messages_in;
                status.messages_out = before.messages_out;
            }
            board.insert(status.name.clone(), status.clone())
        };
        if previous.as_ref().map(|p| p.state) == Some(status.state) {
            return;
        }
        let (kind, data) = match status.state {
            ChannelState::Up => (
                "channel.up",
                json!({"channel": status.name, "target": status.target,
                       "connected": status.connected}),
            ),
            ChannelState::Down => (
                "channel.down",
                json!({"channel": status.name, "target": status.target, "error": status.error,
                       "failures": status.failures, "next_attempt_unix": status.next_attempt_unix}),
            ),
            ChannelState::Connecting | ChannelState::Disabled => return,
        };
        if let Err(err) = self.record_event(kind, None, data).await {
            tracing::warn!(channel = %status.name, error = %err, "cannot record a channel event");
        }
    }

    /// Updates the live counts of a channel without an event.
    pub fn channel_counts(&self, name: &str, connected: usize, queued: usize) {
        if let Some(status) = lock(&self.inner.channels.status).get_mut(name) {
            status.connected = connected;
            status.queued = queued;
        }
    }

    /// Counts messages a channel received (`inbound`) or sent.
    pub fn channel_traffic(&self, name: &str, inbound: u64, outbound: u64) {
        if let Some(status) = lock(&self.inner.channels.status).get_mut(name) {
            status.messages_in += inbound;
            status.messages_out += outbound;
        }
    }

    /// Makes `hook` where webhook deliveries for channel `name` go.
    pub fn set_channel_hook(&self, name: &str, hook: ChannelHook) {
        lock(&self.inner.channels.hooks).insert(name.to_owned(), hook);
    }

    /// Where webhook deliveries for channel `name` go, if it takes them.
    pub fn channel_hook(&self, name: &str) -> Option<ChannelHook> {
        lock(&self.inner.channels.hooks).get(name).cloned()
    }
}
