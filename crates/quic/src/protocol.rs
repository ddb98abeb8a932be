//! The conversation protocol on one bidirectional stream. The client opens with
//! [`ClientFrame::Hello`] (its token and the agent it talks to) and is answered
//! [`ServerFrame::Ready`]; then each [`ClientFrame::Message`] is put in the agent's inbox
//! ([`ServerFrame::Accepted`]) and the agent's protocol events for the turns that answer it
//! come back as [`ServerFrame::Event`], each holding exactly what `reef run --json` prints
//! for that event. A refused frame is answered [`ServerFrame::Error`] and ends the stream;
//! other streams of the connection go on.

use reef_core::{Event, EventMsg};
use serde::{Deserialize, Serialize};

/// The ALPN protocol name the gateway speaks.
pub const ALPN: &[u8] = b"reef/1";

/// What a client sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientFrame {
    /// The first frame of every stream.
    Hello {
        /// A daemon API token (`reef token create`), or the daemon's root token.
        token: String,
        /// The agent this conversation talks to.
        agent: String,
    },
    /// A message for the agent.
    Message {
        text: String,
        /// Makes the delivery idempotent: a message sent again with the same key is not
        /// delivered twice. Defaults to a fresh key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
    },
}

/// What the gateway sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// The conversation is open.
    Ready {
        agent: String,
        /// The agent's state (`running`, `paused`, …).
        state: String,
        /// The token's name, as the daemon knows it.
        token: String,
    },
    /// A message is in the agent's inbox.
    Accepted {
        key: String,
        inbox_id: Option<u64>,
        /// The key had been delivered before: nothing new was sent, and no turn follows.
        duplicate: bool,
    },
    /// One protocol event of a turn answering this conversation's messages.
    Event { event: Event },
    /// The stream's request was refused; the stream ends after this frame.
    Error { code: ErrorCode, message: String },
}

impl ServerFrame {
    /// Whether this frame ends a turn.
    pub fn ends_turn(&self) -> bool {
        matches!(
            self,
            ServerFrame::Event {
                event: Event {
                    msg: EventMsg::TurnEnded { .. },
                    ..
                }
            }
        )
    }
}

/// Why a stream was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A frame over 1 MiB.
    TooLarge,
    /// A frame that is not JSON of this protocol, or a frame out of order.
    BadFrame,
    /// No token, or a wrong one.
    Unauthorized,
    /// The token may not talk to this agent.
    Forbidden,
    /// The token was revoked.
    Revoked,
    /// No such agent.
    NotFound,
    /// The token's request rate is used up; retry after the time named in the message.
    RateLimited,
    /// The message was refused (too long, the agent has ended, …).
    Refused,
    /// The daemon could not do it now; try again.
    Unavailable,
    /// This stream fell too far behind the agent's events; some were missed.
    Lagged,
}

/// QUIC application error codes the gateway closes with.
pub mod close {
    /// A stream's request was refused (after an error frame).
    pub const REFUSED: u32 = 1;
    /// A token the connection used was revoked: the connection ends.
    pub const REVOKED: u32 = 2;
    /// The daemon is shutting down.
    pub const SHUTDOWN: u32 = 3;
    /// The client is done.
    pub const DONE: u32 = 0;
}
