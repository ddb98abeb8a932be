//! The `Channel` trait: a door through which people reach agents (IRC first, messengers
//! later). A channel connects, hands over what people write, sends what agents and the
//! overseer say, and brings agents in and out of its rooms; the daemon's supervisor keeps it
//! connected and routes between it and the agents.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Where a message was written: a room several people share, or a private conversation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "name")]
pub enum Conversation {
    /// A room (`#agents`).
    Room(String),
    /// A private conversation with the named peer (an IRC nick, a chat id).
    Direct(String),
}

impl Conversation {
    /// The room's name or the peer's.
    pub fn name(&self) -> &str {
        match self {
            Conversation::Room(name) | Conversation::Direct(name) => name,
        }
    }
}

/// Who of reef's own identities on the channel speaks or listens.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "name")]
pub enum Speaker {
    /// The overseer, which takes operator commands and makes announcements.
    Overseer,
    /// An agent, by its reef name (its nick on the channel may differ).
    Agent(String),
}

/// Who wrote an inbound message, as the channel identifies them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Author {
    /// The short name others see (an IRC nick).
    pub name: String,
    /// The full identity operator rules are matched against (`nick!user@host`).
    pub identity: String,
}

/// Something that happened on the channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inbound {
    /// Someone wrote `text` where `listener` hears it.
    Message {
        listener: Speaker,
        conversation: Conversation,
        author: Author,
        text: String,
        /// The text had control characters, formatting or invalid UTF-8 removed.
        sanitized: bool,
        /// Written to reef: a direct conversation, or in a room a line that names or answers
        /// reef's identity (a room line that is not is talk between people).
        addressed: bool,
        /// The platform's own id of the message, when it has one: delivering it twice (after
        /// a restart) puts it in the inbox once.
        key: Option<String>,
        /// Where the channel resumes after this message once it is handled (a bot API's
        /// update offset); the gateway keeps it and hands it back through
        /// [`Channel::resume`] before the next connect.
        cursor: Option<String>,
        /// Files the person sent with the message.
        files: Vec<Upload>,
    },
    /// An agent was invited to `room`.
    Invited {
        agent: String,
        room: String,
        author: Author,
    },
}

/// A file that came with a message: a name the person or the platform gave it, its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// What reef asks the channel to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outbound {
    /// Say `text` in `conversation` as `from`; the channel splits it to its limits.
    Say {
        from: Speaker,
        to: Conversation,
        text: String,
    },
    /// Bring an agent onto the channel as its own identity, in `rooms`.
    Arrive { agent: String, rooms: Vec<String> },
    /// An agent joins one more room (after an invitation).
    Join { agent: String, room: String },
    /// An agent leaves the channel, saying why.
    Depart { agent: String, reason: String },
}

/// What a channel looks like from outside.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelHealth {
    /// reef identities connected (the overseer and agents).
    pub connected: usize,
    /// Outbound lines waiting for flood control.
    pub queued: usize,
}

/// Why a channel stopped; the supervisor reconnects after a backoff.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The service could not be reached or the connection broke: retry with backoff.
    #[error("connection: {0}")]
    Connection(String),
    /// The service refused reef (bad password, banned, TLS mismatch): retry with backoff,
    /// though the operator probably has to change the configuration.
    #[error("refused: {0}")]
    Refused(String),
    /// The request itself was wrong (an unknown agent, an unsendable text): not retried.
    #[error("invalid: {0}")]
    Invalid(String),
}

/// A door to agents. `recv` must be cancel-safe: the supervisor races it against outbound
/// work.
#[async_trait]
pub trait Channel: Send + Sync {
    /// Connects (dropping any earlier connection) with the overseer and `agents` present.
    async fn connect(&mut self, agents: &[(String, Vec<String>)]) -> Result<(), ChannelError>;

    /// The next thing that happened. An error means the connection is gone.
    async fn recv(&mut self) -> Result<Inbound, ChannelError>;

    /// Does what `out` asks; a `Say` is queued behind flood control.
    async fn send(&mut self, out: Outbound) -> Result<(), ChannelError>;

    /// Leaves politely (IRC `QUIT`) with `reason`.
    async fn close(&mut self, reason: &str);

    /// The name `speaker` goes by on the channel now (an IRC nick may carry a suffix).
    fn handle(&self, speaker: &Speaker) -> Option<String>;

    /// Whether `author` may run operator commands here.
    fn is_operator(&self, author: &Author) -> bool;

    /// Whether two names on the channel are the same (IRC folds case its own way).
    fn same_name(&self, a: &str, b: &str) -> bool;

    fn health(&self) -> ChannelHealth;

    /// Where to resume: the cursor of the last message the gateway handled, before
    /// `connect`. Channels without a replayable feed (IRC) ignore it.
    fn resume(&mut self, _cursor: Option<String>) {}

    /// The longest answer the gateway hands over in one `Say`, in bytes; the channel splits
    /// it into the platform's messages.
    fn answer_limit(&self) -> usize {
        4000
    }
}
