//! `/mcp`: reef as an MCP server on the daemon. Its tools and resources are answered with
//! the same runtime calls as the HTTP API, behind the same bearer token; a `Host` or
//! `Origin` that is not the daemon's own gets 403.

mod tools;

use async_trait::async_trait;
use reef_mcp::{
    CallResult, Change, HostError, HttpGuard, McpHost, ResourceContents, ResourceInfo, ToolInfo,
};
use reef_runtime::{Runtime, RuntimeError};
use serde_json::{Map, Value};
use std::sync::Arc;
use tokio::sync::broadcast;

/// Event kinds after which the list of agents (and so of resources) differs.
const AGENT_EVENTS: [&str; 2] = ["agent.spawned", "agent.destroyed"];

/// The daemon as an MCP host.
struct DaemonHost {
    runtime: Runtime,
    changes: broadcast::Sender<Change>,
}

/// The `/mcp` routes for `runtime`, answering only to the daemon's `own` names.
pub(crate) fn router(runtime: Runtime, own: &reef_dashboard::Own) -> axum::Router<crate::AppState> {
    let (changes, _) = broadcast::channel(16);
    let stop = tokio_util::sync::CancellationToken::new();
    // Agents coming and going change the resources; tell connected clients.
    let mut events = runtime.bus().subscribe();
    let announce = changes.clone();
    let mut stopping = runtime.stopping();
    let (stop, ends) = (stop.clone(), stop);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    // Missed events may have been spawns: announce a change to be safe.
                    Ok(e) if AGENT_EVENTS.contains(&e.kind.as_str()) => {
                        let _listeners = announce.send(Change::Resources);
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let _listeners = announce.send(Change::Resources);
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = stopping.changed() => {
                    // Open sessions (their event streams) end, so the daemon can stop.
                    stop.cancel();
                    return;
                }
            }
        }
    });
    let host = Arc::new(DaemonHost { runtime, changes });
    reef_mcp::http_router(host, guard(own), ends)
}

/// `/mcp` answers requests addressed to the daemon's own names only.
fn guard(own: &reef_dashboard::Own) -> HttpGuard {
    HttpGuard {
        hosts: own.hosts.clone(),
        origins: own.origins.clone(),
    }
}

#[async_trait]
impl McpHost for DaemonHost {
    async fn tools(&self) -> Result<Vec<ToolInfo>, HostError> {
        Ok(tools::list())
    }

    async fn call(&self, name: &str, args: Map<String, Value>) -> Result<CallResult, HostError> {
        tools::call(&self.runtime, name, args).await
    }

    async fn resources(&self) -> Result<Vec<ResourceInfo>, HostError> {
        let agents = self.runtime.list_agents().await.map_err(failed)?;
        let mut out = Vec::with_capacity(agents.len() * 2);
        for agent in agents {
            out.push(ResourceInfo {
                uri: format!("reef://agents/{}/transcript", agent.name),
                name: format!("{} transcript", agent.name),
                description: Some(format!("Every message of agent {}'s session.", agent.name)),
                mime_type: Some("application/json".into()),
            });
            out.push(ResourceInfo {
                uri: format!("reef://agents/{}/status", agent.name),
                name: format!("{} status", agent.name),
                description: Some(format!("Agent {}'s state, budget and spend.", agent.name)),
                mime_type: Some("application/json".into()),
            });
        }
        Ok(out)
    }

    async fn read(&self, uri: &str) -> Result<Vec<ResourceContents>, HostError> {
        let not_found = || HostError::NotFound(format!("reef has no resource {uri}"));
        let rest = uri.strip_prefix("reef://agents/").ok_or_else(not_found)?;
        let (name, what) = rest.split_once('/').ok_or_else(not_found)?;
        let agent = self.runtime.get_agent(name).await.map_err(|e| match e {
            RuntimeError::NotFound(m) => HostError::NotFound(m),
            other => failed(other),
        })?;
        let text = match what {
            "status" => serde_json::to_string_pretty(&crate::dto::AgentView::from(agent)),
            "transcript" => {
                let messages = match &agent.session {
                    Some(session) => self
                        .runtime
                        .store()
                        .messages(session)
                        .await
                        .map_err(|e| HostError::Failed(e.to_string()))?,
                    None => Vec::new(),
                };
                let entries: Vec<crate::dto::TranscriptEntry> =
                    messages.into_iter().map(Into::into).collect();
                serde_json::to_string_pretty(&entries)
            }
            _ => return Err(not_found()),
        }
        .map_err(|e| HostError::Failed(e.to_string()))?;
        Ok(vec![ResourceContents {
            uri: uri.to_owned(),
            mime_type: Some("application/json".into()),
            text: Some(text),
            blob: None,
        }])
    }

    fn changes(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }
}

/// One configured MCP server, as `reef mcp list` shows it.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct McpServerView {
    pub name: String,
    /// stdio or http.
    pub transport: String,
    /// disabled, idle (not started yet), running, failed or stopped.
    pub state: String,
    /// Tools offered to agents, once listed.
    pub tools: Option<usize>,
    pub last_error: Option<String>,
    /// How often it was started.
    pub starts: u32,
    /// The host PID of its process, while it runs.
    pub pid: Option<u32>,
    /// What its last tool listing left out or renamed.
    pub warnings: Vec<String>,
    /// The templates it is offered to; null = every template.
    pub templates: Option<Vec<String>>,
}

/// `GET /v1/mcp/servers`.
pub(crate) async fn servers(
    axum::extract::State(s): axum::extract::State<crate::AppState>,
) -> axum::Json<Vec<McpServerView>> {
    let views = s
        .runtime
        .mcp_status()
        .into_iter()
        .map(|st| McpServerView {
            name: st.name,
            transport: st.transport.into(),
            state: st.state.into(),
            tools: st.tools,
            last_error: st.last_error,
            starts: st.starts,
            pid: st.pid,
            warnings: st.warnings,
            templates: st.templates,
        })
        .collect();
    axum::Json(views)
}

fn failed(err: RuntimeError) -> HostError {
    HostError::Failed(err.to_string())
}
