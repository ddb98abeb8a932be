//! reef's own view of what an MCP server offers and answers: tools, call results, resources
//! and prompts. The SDK's types stop at the connection (`client/rmcp.rs`), so a new SDK
//! version changes that file only.

use serde::Serialize;
use serde_json::{Map, Value};

/// A tool as the server describes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolInfo {
    /// The server's own name for it.
    pub name: String,
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub input_schema: Map<String, Value>,
}

/// One block of a tool's result, a resource's contents or a prompt message.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    Text(String),
    /// Base64 data and its MIME type: an image or audio clip.
    Media {
        data: String,
        mime_type: String,
    },
    /// A link to a resource the server offers.
    Link {
        uri: String,
        name: Option<String>,
    },
    /// A resource's contents embedded in the result.
    Resource(ResourceContents),
}

/// What a tool call returned (an error result included: `is_error`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct CallResult {
    pub content: Vec<Content>,
    pub structured: Option<Value>,
    pub is_error: bool,
}

/// A resource the server lists.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// The contents of one resource: text, or base64 data.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceContents {
    pub uri: String,
    pub mime_type: Option<String>,
    pub text: Option<String>,
    pub blob: Option<String>,
}

/// A prompt the server lists, with its arguments.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromptInfo {
    pub name: String,
    pub description: Option<String>,
    pub arguments: Vec<PromptArgument>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromptArgument {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
}

/// A prompt filled in: its messages, by role.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptMessages {
    pub description: Option<String>,
    pub messages: Vec<(String, Content)>,
}
