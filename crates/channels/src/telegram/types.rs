//! The parts of the Bot API's objects reef reads. Fields reef does not know are ignored and
//! every optional one defaults, so a platform that adds fields breaks nothing.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One `getUpdates` entry (or webhook delivery).
#[derive(Clone, Debug, Deserialize)]
pub struct Update {
    pub update_id: i64,
    #[serde(default)]
    pub message: Option<Message>,
    /// Every other field: an update of a kind reef does not handle is named by its key.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

impl Update {
    /// The kind of update (`message`, `edited_message`, `callback_query`, …).
    pub fn kind(&self) -> &str {
        if self.message.is_some() {
            return "message";
        }
        self.other.keys().next().map_or("empty", String::as_str)
    }
}

#[derive(Clone, Debug, Deserialize)]
pub struct Message {
    pub message_id: i64,
    #[serde(default)]
    pub from: Option<User>,
    pub chat: Chat,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub caption: Option<String>,
    #[serde(default)]
    pub entities: Vec<Entity>,
    #[serde(default)]
    pub caption_entities: Vec<Entity>,
    #[serde(default)]
    pub reply_to_message: Option<Box<Message>>,
    #[serde(default)]
    pub photo: Vec<PhotoSize>,
    #[serde(default)]
    pub document: Option<Document>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct User {
    pub id: i64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    #[serde(default)]
    pub username: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Chat {
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// A formatting or meaning span, in UTF-16 code units.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct Entity {
    #[serde(rename = "type")]
    pub kind: String,
    pub offset: usize,
    pub length: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct PhotoSize {
    pub file_id: String,
    pub file_unique_id: String,
    #[serde(default)]
    pub width: u32,
    #[serde(default)]
    pub height: u32,
    #[serde(default)]
    pub file_size: Option<u64>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Document {
    pub file_id: String,
    pub file_unique_id: String,
    #[serde(default)]
    pub file_name: Option<String>,
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// `getFile`'s answer.
#[derive(Clone, Debug, Deserialize)]
pub struct File {
    #[serde(default)]
    pub file_path: Option<String>,
    #[serde(default)]
    pub file_size: Option<u64>,
}
