//! The connection to one MCP server, behind reef's own small trait: everything else in reef
//! speaks [`Connection`] and the types of `crate::types`, so the SDK stays in `sdk.rs`.

mod sdk;

use crate::error::McpError;
use crate::serve::Change;
use crate::types::{
    CallResult, PromptInfo, PromptMessages, ResourceContents, ResourceInfo, ToolInfo,
};
use async_trait::async_trait;
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub(crate) use sdk::{connect_http, connect_pipes};

/// A live session with one server. Each request is bounded by the server's timeout (reset by
/// progress notifications, up to ten times the timeout in all); dropping a request's future
/// before it completes sends `notifications/cancelled` for it.
#[async_trait]
pub trait Connection: Send + Sync {
    /// The first `limit` tools, following pages, and how many the server listed (more
    /// pages are not read once `limit` is reached); entries reef cannot read are left out
    /// with a warning.
    async fn list_tools(
        &self,
        limit: usize,
    ) -> Result<(Vec<ToolInfo>, usize, Vec<String>), McpError>;
    async fn call_tool(&self, name: &str, args: Map<String, Value>)
    -> Result<CallResult, McpError>;
    async fn list_resources(&self) -> Result<Vec<ResourceInfo>, McpError>;
    async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>, McpError>;
    async fn list_prompts(&self) -> Result<Vec<PromptInfo>, McpError>;
    async fn get_prompt(
        &self,
        name: &str,
        args: Map<String, Value>,
    ) -> Result<PromptMessages, McpError>;
    /// The connection can no longer carry requests (the server closed it).
    fn is_closed(&self) -> bool;
    /// Ends the session.
    async fn close(&self);
}

/// What a server told reef between requests, shared by the connection and its owner.
#[derive(Debug)]
pub struct Signals {
    tools_changed: AtomicBool,
    progress: AtomicU64,
    changes: tokio::sync::broadcast::Sender<Change>,
}

impl Default for Signals {
    fn default() -> Self {
        Self {
            tools_changed: AtomicBool::new(false),
            progress: AtomicU64::new(0),
            changes: tokio::sync::broadcast::channel(16).0,
        }
    }
}

impl Signals {
    pub(crate) fn note_tools_changed(&self) {
        self.tools_changed.store(true, Ordering::SeqCst);
        // Nobody listening is fine: the flag is what the hub reads.
        let _listeners = self.changes.send(Change::Tools);
    }

    pub(crate) fn note_resources_changed(&self) {
        let _listeners = self.changes.send(Change::Resources);
    }

    /// The server's announced changes, from now on.
    pub fn changes(&self) -> tokio::sync::broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// Whether the tool list changed since the last call (and clears the mark).
    pub fn take_tools_changed(&self) -> bool {
        self.tools_changed.swap(false, Ordering::SeqCst)
    }

    pub(crate) fn note_progress(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Progress notifications received so far.
    pub fn progress_count(&self) -> u64 {
        self.progress.load(Ordering::Relaxed)
    }
}
