//! Tools: the spec a model sees, a call it makes, the output it gets back, and the `Tool` trait.

use crate::ids::{SessionId, ToolCallId};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a model is told about a tool: its public name, purpose and JSON-schema parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object describing the arguments.
    pub parameters: serde_json::Value,
}

/// A tool call as the model made it. `arguments` is kept verbatim (a JSON text) so that a
/// malformed call can be reported back to the model instead of being lost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: ToolCallId,
    pub name: String,
    pub arguments: String,
}

/// The result of one tool call as sent back to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
        }
    }
}

/// Where and for whom a tool runs.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The agent's workspace: relative paths resolve here and it is the only writable place.
    pub workspace: PathBuf,
    pub session_id: SessionId,
    pub call_id: ToolCallId,
    /// Host folders the call's commands may read besides the workspace (the folders of the
    /// agent's skills), shown read-only inside the sandbox.
    pub read_only: Vec<PathBuf>,
}

/// Why a tool call failed. Every variant is recovered the same way: the message goes back
/// to the model as an error result and the turn continues.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments did not match the tool's schema; the model should fix its call.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The action was refused by policy (path outside the workspace, private address, …).
    #[error("denied: {0}")]
    Denied(String),
    /// The tool ran out of time.
    #[error("timed out after {0} s")]
    Timeout(u64),
    /// The action was attempted and failed.
    #[error("{0}")]
    Failed(String),
}

/// Where a call's arguments may travel beyond reef.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Egress {
    /// Nowhere: the call stays on this machine.
    None,
    /// To these hosts only.
    Hosts(Vec<String>),
    /// Anywhere: a command with network access, a program or server reef does not see into.
    Anywhere,
}

/// Where content from outside the operator's control comes from: it reaches the model fenced
/// and labelled with this, under `[safety.sources]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContentSource {
    /// A page or API answer (`http_fetch`).
    Fetched,
    /// An MCP server's result.
    Mcp,
    /// A skill's output.
    Skill,
    /// A file in the workspace (which the agent, and whatever it ran, may have written).
    File,
    /// A message on a channel from someone who is not an operator.
    Channel,
    /// A webhook's payload.
    Webhook,
}

impl ContentSource {
    pub const ALL: [ContentSource; 6] = [
        ContentSource::Fetched,
        ContentSource::Mcp,
        ContentSource::Skill,
        ContentSource::File,
        ContentSource::Channel,
        ContentSource::Webhook,
    ];

    /// The name `[safety.sources]` and the fences use.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentSource::Fetched => "fetched",
            ContentSource::Mcp => "mcp",
            ContentSource::Skill => "skill",
            ContentSource::File => "file",
            ContentSource::Channel => "channel",
            ContentSource::Webhook => "webhook",
        }
    }
}

/// A capability an agent can invoke. Implemented by built-in tools, skills and MCP servers.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The spec the model sees; `spec().name` is the tool's stable public name.
    fn spec(&self) -> ToolSpec;

    /// What a call with `args` needs besides the tool itself (the paths it reads or writes,
    /// the hosts it reaches, the secrets it uses), checked against the agent's capabilities
    /// before it runs. Arguments the call would reject anyway may be ignored here.
    fn needs(&self, _args: &serde_json::Value) -> Vec<crate::capability::Need> {
        Vec::new()
    }

    /// Where a call with `args` sends what it was given beyond this machine, so the leak
    /// detector can look at the arguments first: by default the hosts among its `needs`.
    fn egress(&self, args: &serde_json::Value) -> Egress {
        let hosts: Vec<String> = self
            .needs(args)
            .into_iter()
            .filter_map(|n| match n {
                crate::capability::Need::Domain(host) => Some(host),
                _ => None,
            })
            .collect();
        if hosts.is_empty() {
            Egress::None
        } else {
            Egress::Hosts(hosts)
        }
    }

    /// Where the call's result comes from, when that is outside the operator's control (a
    /// fetched page, a file, an MCP server, a skill): the result then reaches the model fenced
    /// and checked under `[safety.sources]`. `None` for results reef itself makes.
    fn content_source(&self) -> Option<ContentSource> {
        None
    }

    /// Runs the tool. A returned error becomes an error result for the model.
    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError>;
}
