//! `GET /v1/channels`: each configured channel's state as its supervisor last reported it.

use crate::AppState;
use axum::Json;
use axum::extract::State;
use reef_runtime::{ChannelState, ChannelStatus};
use schemars::JsonSchema;
use serde::Serialize;

/// One channel.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ChannelView {
    /// The `[channels.NAME]` table's name.
    pub name: String,
    /// `irc` or `telegram`.
    pub kind: String,
    /// Where it connects (`host:port`).
    pub target: String,
    /// `connecting`, `up`, `down` or `disabled`.
    pub state: String,
    /// Unix seconds since when it is in this state.
    pub since_unix: i64,
    /// Why it is down.
    pub error: Option<String>,
    /// Failed attempts in a row.
    pub failures: u32,
    /// Unix seconds of the next attempt, when down.
    pub next_attempt_unix: Option<i64>,
    /// reef identities connected (the overseer and agents).
    pub connected: usize,
    /// Outbound lines waiting for flood control.
    pub queued: usize,
    /// Connections made after the first.
    pub reconnects: u32,
    /// Messages received and handled since the daemon started.
    pub messages_in: u64,
    /// Messages sent since the daemon started.
    pub messages_out: u64,
}

impl From<ChannelStatus> for ChannelView {
    fn from(s: ChannelStatus) -> Self {
        let state = match s.state {
            ChannelState::Connecting => "connecting",
            ChannelState::Up => "up",
            ChannelState::Down => "down",
            ChannelState::Disabled => "disabled",
        };
        ChannelView {
            name: s.name,
            kind: s.kind,
            target: s.target,
            state: state.to_owned(),
            since_unix: s.since_unix,
            error: s.error,
            failures: s.failures,
            next_attempt_unix: s.next_attempt_unix,
            connected: s.connected,
            queued: s.queued,
            reconnects: s.reconnects,
            messages_in: s.messages_in,
            messages_out: s.messages_out,
        }
    }
}

pub async fn list(State(s): State<AppState>) -> Json<Vec<ChannelView>> {
    Json(
        s.runtime
            .channels()
            .into_iter()
            .map(ChannelView::from)
            .collect(),
    )
}
