//! Mapping between `reef_core::Message` and the columns of the `messages` table.

use crate::error::StoreError;
use reef_core::{Message, Role, ToolCall, ToolCallId};

/// The column values of one message row (everything but session, seq and timestamp).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MessageRow {
    pub role: String,
    pub content: String,
    /// JSON array of `ToolCall`, `None` when the message has no tool calls.
    pub tool_calls: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub is_error: bool,
}

impl MessageRow {
    /// Splits a message into columns. Fails only if tool calls cannot be serialized.
    pub(crate) fn encode(message: &Message) -> Result<MessageRow, StoreError> {
        let mut row = MessageRow {
            role: message.role().as_str().to_owned(),
            content: message.content().to_owned(),
            tool_calls: None,
            tool_call_id: None,
            tool_name: None,
            is_error: false,
        };
        match message {
            Message::System { .. } | Message::User { .. } => {}
            Message::Assistant { tool_calls, .. } => {
                if !tool_calls.is_empty() {
                    let json = serde_json::to_string(tool_calls).map_err(|e| {
                        StoreError::Corrupt(format!("cannot encode tool calls: {e}"))
                    })?;
                    row.tool_calls = Some(json);
                }
            }
            Message::Tool {
                call_id,
                name,
                is_error,
                ..
            } => {
                row.tool_call_id = Some(call_id.as_str().to_owned());
                row.tool_name = Some(name.clone());
                row.is_error = *is_error;
            }
        }
        Ok(row)
    }

    /// Rebuilds the message; `what` names the row in a `Corrupt` error.
    pub(crate) fn decode(self, what: &str) -> Result<Message, StoreError> {
        let role = Role::parse(&self.role)
            .ok_or_else(|| StoreError::Corrupt(format!("{what}: unknown role '{}'", self.role)))?;
        Ok(match role {
            Role::System => Message::System {
                content: self.content,
            },
            Role::User => Message::User {
                content: self.content,
            },
            Role::Assistant => {
                let tool_calls = match self.tool_calls.as_deref() {
                    None => Vec::new(),
                    Some(json) => serde_json::from_str::<Vec<ToolCall>>(json).map_err(|e| {
                        StoreError::Corrupt(format!("{what}: invalid tool_calls JSON: {e}"))
                    })?,
                };
                Message::Assistant {
                    content: self.content,
                    tool_calls,
                }
            }
            Role::Tool => {
                let call_id = self.tool_call_id.ok_or_else(|| {
                    StoreError::Corrupt(format!("{what}: tool message without tool_call_id"))
                })?;
                let name = self.tool_name.ok_or_else(|| {
                    StoreError::Corrupt(format!("{what}: tool message without tool_name"))
                })?;
                Message::Tool {
                    call_id: ToolCallId::from_string(call_id),
                    name,
                    content: self.content,
                    is_error: self.is_error,
                }
            }
        })
    }
}

/// A session title from a user message: whitespace collapsed, at most 80 characters.
/// `None` if the message is blank.
pub(crate) fn title_from(content: &str) -> Option<String> {
    let collapsed = content.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return None;
    }
    Some(collapsed.chars().take(80).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]
    use super::*;

    #[test]
    fn tool_row_without_call_id_is_corrupt() {
        let row = MessageRow {
            role: "tool".into(),
            content: "x".into(),
            tool_calls: None,
            tool_call_id: None,
            tool_name: Some("shell".into()),
            is_error: false,
        };
        assert!(matches!(row.decode("m"), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn encode_decode_assistant_with_calls() {
        let m = Message::Assistant {
            content: "hi".into(),
            tool_calls: vec![ToolCall {
                id: ToolCallId::from("c1"),
                name: "read".into(),
                arguments: "{\"path\":".into(),
            }],
        };
        let row = MessageRow::encode(&m).unwrap();
        assert!(row.tool_calls.is_some());
        assert_eq!(row.decode("m").unwrap(), m);
    }

    #[test]
    fn titles_are_collapsed_and_truncated() {
        assert_eq!(title_from("  \n "), None);
        assert_eq!(
            title_from(" fix\n the  bug ").as_deref(),
            Some("fix the bug")
        );
        let long = "é".repeat(100);
        assert_eq!(title_from(&long).unwrap().chars().count(), 80);
    }
}
