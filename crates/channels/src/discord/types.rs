//! The parts of Discord's payloads reef reads: the gateway's envelope, users, messages and
//! READY. Unknown fields are ignored; missing optional ones take their defaults.

use serde::Deserialize;
use serde_json::Value;

/// A gateway payload: an opcode, its data, and for dispatches (op 0) the sequence number
/// and the event's name.
#[derive(Clone, Debug, Deserialize)]
pub struct Payload {
    pub op: u8,
    #[serde(default)]
    pub d: Value,
    #[serde(default)]
    pub s: Option<u64>,
    #[serde(default)]
    pub t: Option<String>,
}

/// The gateway's opcodes reef uses.
pub mod op {
    pub const DISPATCH: u8 = 0;
    pub const HEARTBEAT: u8 = 1;
    pub const IDENTIFY: u8 = 2;
    pub const RESUME: u8 = 6;
    pub const RECONNECT: u8 = 7;
    pub const INVALID_SESSION: u8 = 9;
    pub const HELLO: u8 = 10;
    pub const HEARTBEAT_ACK: u8 = 11;
}

#[derive(Clone, Debug, Deserialize)]
pub struct User {
    /// A snowflake, as a string.
    pub id: String,
    pub username: String,
    #[serde(default)]
    pub global_name: Option<String>,
    #[serde(default)]
    pub bot: bool,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Message {
    pub id: String,
    pub channel_id: String,
    /// None in a DM.
    #[serde(default)]
    pub guild_id: Option<String>,
    pub author: User,
    #[serde(default)]
    pub content: String,
    /// 0: an ordinary message, 19: a reply; the others are system messages.
    #[serde(rename = "type", default)]
    pub kind: u8,
    #[serde(default)]
    pub mentions: Vec<User>,
    #[serde(default)]
    pub referenced_message: Option<Box<Message>>,
    /// Set on messages a webhook posted.
    #[serde(default)]
    pub webhook_id: Option<String>,
    #[serde(default)]
    pub attachments: Vec<Attachment>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Attachment {
    pub filename: String,
    #[serde(default)]
    pub size: u64,
}

/// READY's data: the session to resume and the bot's own user.
#[derive(Clone, Debug, Deserialize)]
pub struct Ready {
    pub session_id: String,
    #[serde(default)]
    pub resume_gateway_url: Option<String>,
    pub user: User,
}

/// HELLO's data.
#[derive(Clone, Debug, Deserialize)]
pub struct Hello {
    /// Milliseconds.
    pub heartbeat_interval: u64,
}
