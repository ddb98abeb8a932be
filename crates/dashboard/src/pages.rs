//! The signed-in pages (overview, agent, spawn) and the fragments they are made of, which
//! the live stream sends again when what they show changes.

use crate::Dash;
use crate::auth::Session;
use crate::view::{
    AgentHead, AgentPage, AgentRow, AgentsTable, Chrome, Entries, InboxRow, OverviewPage,
    PendingList, SpawnPage, StatusLine, Time, agent_row, duration, entries, fragment, money, page,
    pending_row,
};
use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use reef_core::AgentId;
use reef_runtime::RuntimeError;
use reef_store::{AgentRecord, InboxStatus, PendingStatus};
use serde::Deserialize;

/// Transcript messages shown at first, and per page back.
pub(crate) const TRANSCRIPT_PAGE: usize = 100;
/// Inbox messages listed on the agent page.
const INBOX_SHOWN: usize = 20;

/// A runtime failure as an answer a person can read.
pub(crate) fn failure(err: &RuntimeError) -> Response {
    let status = match err {
        RuntimeError::NotFound(_) => StatusCode::NOT_FOUND,
        RuntimeError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        RuntimeError::Conflict(_) => StatusCode::CONFLICT,
        RuntimeError::Denied(_) => StatusCode::FORBIDDEN,
        RuntimeError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        RuntimeError::Store(_) | RuntimeError::Setup(_) | RuntimeError::Cluster(_) => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    };
    let html = format!(
        r#"<p class="notice error" role="alert">{}</p>"#,
        crate::view::escape(&err.to_string())
    );
    (status, axum::response::Html(html)).into_response()
}

/// `GET /`.
pub(crate) async fn overview(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
) -> Response {
    let built = async {
        Ok::<_, RuntimeError>(OverviewPage {
            chrome: Chrome::new("reef", &session.csrf, "overview"),
            agents: agents_table(&d).await?,
            pending: pending_list(&d, None).await?,
            status: status_line(&d).await?,
            health: crate::health::health(&d).await?,
        })
    };
    match built.await {
        Ok(overview) => page(&overview),
        Err(err) => failure(&err),
    }
}

/// The agents table.
pub(crate) async fn agents_table(d: &Dash) -> Result<String, RuntimeError> {
    let agents = d.runtime.list_agents().await?;
    let mut rows = Vec::with_capacity(agents.len());
    for agent in &agents {
        rows.push(row(d, agent).await?);
    }
    Ok(fragment(&AgentsTable { rows }))
}

async fn row(d: &Dash, agent: &AgentRecord) -> Result<AgentRow, RuntimeError> {
    let store = d.runtime.store();
    let (usage, _) = store.agent_usage(&agent.id).await?;
    let today = store
        .cost_report(Some(&agent.name), Some(&reef_store::start_of_today()))
        .await?;
    let cost_today = today.iter().map(|r| r.cost_micros).sum();
    let tokens = usage.input_tokens + usage.output_tokens;
    Ok(agent_row(
        agent,
        &d.runtime.doing(&agent.id),
        tokens,
        cost_today,
    ))
}

/// Questions and approvals waiting for the operator (only `agent`'s when given).
pub(crate) async fn pending_list(
    d: &Dash,
    agent: Option<&AgentId>,
) -> Result<String, RuntimeError> {
    let items = d.runtime.list_pending(false).await?;
    let items = items
        .iter()
        .filter(|i| i.status == PendingStatus::Pending)
        .filter(|i| {
            matches!(
                i.kind,
                reef_store::PendingKind::Question | reef_store::PendingKind::Approval
            )
        })
        .filter(|i| agent.is_none_or(|a| i.agent_id.as_ref() == Some(a)))
        .map(pending_row)
        .collect();
    Ok(fragment(&PendingList { items }))
}

/// The daemon's status line.
pub(crate) async fn status_line(d: &Dash) -> Result<String, RuntimeError> {
    let (queued, running) = d.runtime.store().inbox_counts().await?;
    let agents = d.runtime.list_agents().await?.len();
    let channels = d
        .runtime
        .channels()
        .into_iter()
        .map(|c| (c.name, c.state.to_string()))
        .collect();
    Ok(fragment(&StatusLine {
        uptime: duration(d.runtime.uptime().as_secs()),
        running_turns: usize::try_from(running).unwrap_or(usize::MAX),
        queued: usize::try_from(queued).unwrap_or(usize::MAX),
        agents,
        channels,
        version: env!("CARGO_PKG_VERSION"),
    }))
}

/// `GET /agents/{name}`.
pub(crate) async fn agent(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
    Path(name): Path<String>,
) -> Response {
    let built = async {
        let after = d.runtime.store().last_event_seq().await?;
        let agent = d.runtime.get_agent(&name).await?;
        let inbox = d
            .runtime
            .store()
            .inbox(&agent.id, InboxStatus::Pending)
            .await?;
        let inbox = inbox
            .iter()
            .rev()
            .take(INBOX_SHOWN)
            .map(|m| InboxRow {
                from: m.sender.clone(),
                body: m.body.clone(),
                at: Time::parse(&m.created_at),
            })
            .collect();
        Ok::<_, RuntimeError>(AgentPage {
            chrome: Chrome::new(format!("{} · reef", agent.name), &session.csrf, "agents"),
            head: agent_head(&d, &agent).await?,
            transcript: transcript(&d, &agent, None).await?,
            pending: pending_list(&d, Some(&agent.id)).await?,
            inbox,
            persona: agent.persona.clone(),
            models: d.runtime.config().providers.keys().cloned().collect(),
            after,
            key: format!("dashboard:{}", crate::auth::random_hex()),
            spend: crate::inspect::spend(&d, &agent).await?,
            memories: crate::inspect::memories(&d, &agent.name, "").await?,
            notes: crate::inspect::notes(&d, &agent).await,
            files: crate::inspect::browse(&d, &agent, "").await,
            file_cap: crate::inspect::size(crate::inspect::FILE_SHOWN_BYTES),
            terminal: d.runtime.config().dashboard.terminal,
            name: agent.name,
        })
    };
    match built.await {
        Ok(agent) => page(&agent),
        Err(err) => failure(&err),
    }
}

/// The agent page's head.
pub(crate) async fn agent_head(d: &Dash, agent: &AgentRecord) -> Result<String, RuntimeError> {
    let (_, cost_total) = d.runtime.store().agent_usage(&agent.id).await?;
    Ok(fragment(&AgentHead {
        cost_total: money(cost_total),
        row: row(d, agent).await?,
    }))
}

/// The last transcript messages before seq `before`.
async fn transcript(
    d: &Dash,
    agent: &AgentRecord,
    before: Option<u64>,
) -> Result<String, RuntimeError> {
    let Some(session) = &agent.session else {
        return Ok(fragment(&Entries {
            agent: agent.name.clone(),
            entries: Vec::new(),
            older: None,
        }));
    };
    let messages = d
        .runtime
        .store()
        .messages_page(session, before, TRANSCRIPT_PAGE)
        .await?;
    let older = match messages.first() {
        Some(first) if first.seq > 1 && messages.len() == TRANSCRIPT_PAGE => Some(first.seq),
        _ => None,
    };
    Ok(fragment(&Entries {
        agent: agent.name.clone(),
        entries: entries(&messages),
        older,
    }))
}

#[derive(Deserialize)]
pub(crate) struct Before {
    before: Option<u64>,
}

/// `GET /agents/{name}/transcript?before=SEQ`: an older page of the conversation.
pub(crate) async fn transcript_page(
    State(d): State<Dash>,
    Path(name): Path<String>,
    Query(q): Query<Before>,
) -> Response {
    let built = async {
        let agent = d.runtime.get_agent(&name).await?;
        transcript(&d, &agent, q.before).await
    };
    match built.await {
        Ok(html) => axum::response::Html(html).into_response(),
        Err(err) => failure(&err),
    }
}

/// `GET /spawn`.
pub(crate) async fn spawn(
    State(d): State<Dash>,
    Extension(session): Extension<Session>,
) -> Response {
    page(&SpawnPage {
        chrome: Chrome::new("Spawn · reef", &session.csrf, "spawn"),
        templates: d
            .runtime
            .templates()
            .iter()
            .map(|t| (t.name.clone(), t.description.clone()))
            .collect(),
        models: d.runtime.config().providers.keys().cloned().collect(),
    })
}
