//! The QUIC gateway's wire, shared by the daemon's listener (in `reef-server`) and the
//! remote client (`reef connect`): [`frame`]s of length-prefixed JSON, the conversation
//! [`protocol`], QUIC [`endpoint`]s with certificate pinning, and the [`client`].

pub mod client;
pub mod endpoint;
pub mod frame;
pub mod protocol;

pub use client::{Client, ClientError, Conversation, Said};
pub use endpoint::{EndpointError, fingerprint, parse_fingerprint};
pub use frame::{FrameError, MAX_FRAME};
pub use protocol::{ALPN, ClientFrame, ErrorCode, ServerFrame};
