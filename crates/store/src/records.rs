//! The plain data the store takes in and hands back; all serializable so front ends can print JSON.

use reef_core::{Message, SessionId, Usage};
use serde::Serialize;

/// What is needed to start a session; timestamps and title are filled in by the store.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewSession {
    pub id: SessionId,
    /// The agent whose transcript this is (`main` for `reef run`/`chat`); searched by
    /// `search_sessions`.
    pub agent: Option<String>,
    pub workspace: String,
    pub provider: String,
    pub model: String,
}

/// A session as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRecord {
    pub id: SessionId,
    /// Taken from the first user message; `None` until there is one.
    pub title: Option<String>,
    pub workspace: String,
    pub provider: String,
    pub model: String,
    /// RFC3339 UTC, millisecond precision.
    pub created_at: String,
    /// RFC3339 UTC, millisecond precision; bumped by every appended message.
    pub updated_at: String,
}

/// One line of a session listing, with its size and token totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionSummary {
    pub id: SessionId,
    pub title: Option<String>,
    pub provider: String,
    pub model: String,
    pub created_at: String,
    pub updated_at: String,
    pub message_count: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// A message with its position in the session (1-based, gap-free) and when it was stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredMessage {
    pub seq: u64,
    pub created_at: String,
    pub message: Message,
}

/// Token usage of one model request, to be recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewUsage {
    pub provider: String,
    pub model: String,
    pub usage: Usage,
    /// The model round within the turn that made the request.
    pub round: u32,
    /// What it cost in millionths of a US dollar; `None` when the model has no known price.
    pub cost_micros: Option<u64>,
}

/// Token usage of one model request, as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageRecord {
    pub provider: String,
    pub model: String,
    pub usage: Usage,
    pub round: u32,
    pub cost_micros: Option<u64>,
    pub created_at: String,
}

/// One day's group of requests in a daily cost report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DailyCost {
    /// The UTC day, `YYYY-MM-DD`.
    pub day: String,
    pub row: CostRow,
}

/// Tokens and cost of one group of requests in a cost report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostRow {
    /// The daemon agent whose session made the requests; `None` for `reef run`/`chat`.
    pub agent: Option<String>,
    pub provider: String,
    pub model: String,
    pub requests: u64,
    pub usage: Usage,
    /// Millionths of a US dollar over the requests with a known price.
    pub cost_micros: u64,
    /// Requests whose model had no known price (not in `cost_micros`).
    pub unpriced_requests: u64,
}
