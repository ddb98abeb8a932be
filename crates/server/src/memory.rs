//! `POST /v1/memory/search`: long-term memory searched by the daemon, with its vector index
//! already in RAM and its background embedder's note, so a CLI next to a running daemon
//! asks here instead of loading an index of its own.

use crate::AppState;
use crate::error::ApiError;
use crate::extract::JsonBody;
use axum::Json;
use axum::extract::State;
use reef_store::{SearchMode, SearchRequest};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearchBody {
    pub query: String,
    /// `agent:NAME` and `shared` namespaces searched (at least one).
    pub namespaces: Vec<String>,
    /// Hits returned, 1 to 1000 (default 5).
    pub limit: Option<u32>,
    /// `hybrid` (default), `keyword` or `vector`.
    pub mode: Option<String>,
    /// Every one of these tags must be on the item.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Only items created at or after this timestamp.
    pub since: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryHitView {
    pub item_id: i64,
    pub chunk_id: i64,
    pub namespace: String,
    pub text: String,
    pub tags: Vec<String>,
    pub source: Option<String>,
    pub created_at: String,
    pub score: f64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct MemorySearchView {
    /// How it ranked: `hybrid`, `keyword` or `vector`.
    pub mode: String,
    pub hits: Vec<MemoryHitView>,
    /// Anything the caller should know (no embedder, chunks still waiting for a vector).
    pub note: Option<String>,
}

pub async fn search(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<MemorySearchBody>,
) -> Result<Json<MemorySearchView>, ApiError> {
    let mode: SearchMode = body.mode.as_deref().unwrap_or("hybrid").parse()?;
    let outcome = s
        .runtime
        .memory()
        .search(SearchRequest {
            namespaces: body.namespaces,
            text: body.query,
            tags: body.tags,
            since: body.since,
            limit: body.limit.unwrap_or(5) as usize,
            mode,
        })
        .await?;
    Ok(Json(MemorySearchView {
        mode: outcome.mode.to_string(),
        hits: outcome
            .hits
            .into_iter()
            .map(|h| MemoryHitView {
                item_id: h.item_id,
                chunk_id: h.chunk_id,
                namespace: h.namespace,
                text: h.text,
                tags: h.tags,
                source: h.source,
                created_at: h.created_at,
                score: h.score,
            })
            .collect(),
        note: outcome.note,
    }))
}
