//! The memory tools: `memory_save`, `memory_search`, `memory_forget` (long-term memory in the
//! agent's namespace, plus the shared one) and `session_search` (the agent's past transcripts).
//! An agent reads its own namespace and `shared`; it writes `shared` only with the capability.

use crate::args::parse_args;
use async_trait::async_trait;
use reef_core::{Need, Tool, ToolContext, ToolError, ToolSpec};
use reef_store::{Memory, NewMemory, SHARED_NAMESPACE, SearchMode, SearchRequest, StoreError};
use serde::Deserialize;
use serde_json::json;
use std::fmt::Write as _;
use std::sync::Arc;

const DEFAULT_LIMIT: usize = 5;
const MAX_LIMIT: usize = 20;

/// Who the memory tools act for.
#[derive(Clone, Debug)]
pub struct MemoryScope {
    /// The agent's name: its namespace is `agent:NAME` and its sessions are searched.
    pub agent: String,
    /// May save to and forget from the shared namespace.
    pub write_shared: bool,
}

impl MemoryScope {
    fn own(&self) -> String {
        format!("agent:{}", self.agent)
    }

    fn readable(&self) -> Vec<String> {
        vec![self.own(), SHARED_NAMESPACE.to_owned()]
    }

    fn writable(&self) -> Vec<String> {
        let mut out = vec![self.own()];
        if self.write_shared {
            out.push(SHARED_NAMESPACE.to_owned());
        }
        out
    }
}

/// The four memory tools over `memory`, acting for `scope`.
pub fn memory_tools(memory: Memory, scope: MemoryScope) -> Vec<Arc<dyn Tool>> {
    let shared = Arc::new(Shared { memory, scope });
    vec![
        Arc::new(MemorySave(shared.clone())),
        Arc::new(MemorySearch(shared.clone())),
        Arc::new(MemoryForget(shared.clone())),
        Arc::new(SessionSearch(shared)),
    ]
}

struct Shared {
    memory: Memory,
    scope: MemoryScope,
}

fn failed(e: StoreError) -> ToolError {
    match e {
        StoreError::Invalid { field, message } => {
            ToolError::InvalidArguments(format!("{field}: {message}"))
        }
        other => ToolError::Failed(other.to_string()),
    }
}

fn check_limit(limit: Option<usize>) -> Result<usize, ToolError> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(n) => Err(ToolError::InvalidArguments(format!(
            "limit: {n} is not between 1 and {MAX_LIMIT}"
        ))),
    }
}

struct MemorySave(Arc<Shared>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SaveArgs {
    text: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    shared: bool,
}

#[async_trait]
impl Tool for MemorySave {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_save".into(),
            description: "Save a fact, decision or document to your long-term memory, to be \
                          found later with memory_search (in this or any later session). Write \
                          it so it makes sense on its own."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "What to remember."},
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "Labels to filter by later."},
                    "shared": {"type": "boolean", "description": "Save to the memory every agent reads (needs permission; default false: your own)."}
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    fn needs(&self, args: &serde_json::Value) -> Vec<Need> {
        let shared = args.get("shared").and_then(|s| s.as_bool()) == Some(true);
        vec![Need::MemoryWrite(
            if shared { SHARED_NAMESPACE } else { "self" }.to_owned(),
        )]
    }

    async fn call(&self, ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: SaveArgs = parse_args(args)?;
        let scope = &self.0.scope;
        let namespace = if args.shared {
            if !scope.write_shared {
                return Err(ToolError::Denied(
                    "this agent may not write to shared memory".into(),
                ));
            }
            SHARED_NAMESPACE.to_owned()
        } else {
            scope.own()
        };
        let saved = self
            .0
            .memory
            .save(NewMemory {
                namespace,
                text: args.text,
                tags: args.tags,
                source: Some(format!("session {}", ctx.session_id)),
            })
            .await
            .map_err(failed)?;
        let mut out = format!(
            "saved memory #{} in {} ({} chunk{})",
            saved.item.id,
            saved.item.namespace,
            saved.item.chunks,
            if saved.item.chunks == 1 { "" } else { "s" }
        );
        if let Some(note) = saved.note {
            let _ = write!(out, "\nnote: {note}");
        }
        Ok(out)
    }
}

struct MemorySearch(Arc<Shared>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    mode: Option<String>,
}

#[async_trait]
impl Tool for MemorySearch {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_search".into(),
            description: "Search your long-term memory and the shared memory, by meaning and \
                          by keyword. Returns the best matching passages with their memory ids."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you are looking for, in words or exact terms."},
                    "tags": {"type": "array", "items": {"type": "string"}, "description": "Only memories with all of these tags."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": format!("How many passages (default {DEFAULT_LIMIT}).")},
                    "mode": {"type": "string", "enum": ["hybrid", "keyword", "vector"], "description": "Ranking (default hybrid)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    fn needs(&self, _args: &serde_json::Value) -> Vec<Need> {
        vec![
            Need::MemoryRead("self".to_owned()),
            Need::MemoryRead(SHARED_NAMESPACE.to_owned()),
        ]
    }

    async fn call(&self, _ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: SearchArgs = parse_args(args)?;
        let mode = match args.mode.as_deref() {
            None => SearchMode::Hybrid,
            Some(m) => m.parse().map_err(failed)?,
        };
        let outcome = self
            .0
            .memory
            .search(SearchRequest {
                namespaces: self.0.scope.readable(),
                text: args.query,
                tags: args.tags,
                since: None,
                limit: check_limit(args.limit)?,
                mode,
            })
            .await
            .map_err(failed)?;
        let mut out = String::new();
        if let Some(note) = &outcome.note {
            let _ = writeln!(out, "({note})");
        }
        if outcome.hits.is_empty() {
            out.push_str("no matching memories");
            return Ok(out);
        }
        for hit in &outcome.hits {
            let tags = if hit.tags.is_empty() {
                String::new()
            } else {
                format!(" tags: {}", hit.tags.join(", "))
            };
            let _ = writeln!(
                out,
                "#{} [{}] {}{tags}\n{}\n",
                hit.item_id,
                hit.namespace,
                hit.created_at,
                hit.text.trim()
            );
        }
        Ok(out.trim_end().to_owned())
    }
}

struct MemoryForget(Arc<Shared>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ForgetArgs {
    id: i64,
}

#[async_trait]
impl Tool for MemoryForget {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_forget".into(),
            description: "Delete a memory by the id memory_search showed (#ID). Only your own \
                          memories (and shared ones, with permission) can be deleted."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "description": "The memory id, without the #."}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        }
    }

    fn needs(&self, _args: &serde_json::Value) -> Vec<Need> {
        vec![Need::MemoryWrite("self".to_owned())]
    }

    async fn call(&self, _ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: ForgetArgs = parse_args(args)?;
        let forgotten = self
            .0
            .memory
            .store()
            .forget_memory(self.0.scope.writable(), args.id)
            .await
            .map_err(failed)?;
        if forgotten {
            Ok(format!("forgot memory #{}", args.id))
        } else {
            Err(ToolError::Failed(format!(
                "no memory #{} that this agent may delete",
                args.id
            )))
        }
    }
}

struct SessionSearch(Arc<Shared>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionArgs {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    since_days: Option<u32>,
}

#[async_trait]
impl Tool for SessionSearch {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "session_search".into(),
            description: "Full-text search over everything said in your past sessions (yours \
                          and the user's messages), e.g. to recall what was decided about \
                          something. Returns matching excerpts with their session and time."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to look for."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": format!("How many excerpts (default {DEFAULT_LIMIT}).")},
                    "since_days": {"type": "integer", "minimum": 1, "description": "Only the last N days."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    fn needs(&self, _args: &serde_json::Value) -> Vec<Need> {
        vec![Need::MemoryRead("self".to_owned())]
    }

    async fn call(&self, _ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: SessionArgs = parse_args(args)?;
        let since = args.since_days.map(|d| {
            reef_store::timestamp_ago(std::time::Duration::from_secs(u64::from(d) * 86_400))
        });
        let hits = self
            .0
            .memory
            .store()
            .search_sessions(
                &self.0.scope.agent,
                &args.query,
                since,
                check_limit(args.limit)?,
            )
            .await
            .map_err(failed)?;
        if hits.is_empty() {
            return Ok("nothing matching in past sessions".into());
        }
        let mut out = String::new();
        for hit in hits {
            // A tool result says which tool gave it: `tool shell`.
            let who = match &hit.tool {
                Some(tool) => format!("{} {tool}", hit.role),
                None => hit.role.clone(),
            };
            let _ = writeln!(
                out,
                "session {} #{} {} {who}: {}",
                hit.session_id, hit.seq, hit.created_at, hit.snippet
            );
        }
        Ok(out.trim_end().to_owned())
    }
}
