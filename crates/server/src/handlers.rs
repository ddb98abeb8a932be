//! The route handlers: thin translations between HTTP and `Runtime` operations.

use crate::AppState;
use crate::auth::Grant;
use crate::dto::*;
use crate::error::ApiError;
use crate::extract::{JsonBody, Params};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use reef_core::SessionId;
use reef_runtime::{Sender, SpawnRequest};
use reef_store::InboxStatus;
use serde::Deserialize;

type Api<T> = Result<Json<T>, ApiError>;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeQuery {
    #[serde(default)]
    pub purge: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboxQuery {
    pub status: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllQuery {
    #[serde(default)]
    pub all: bool,
    pub kind: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    pub after: Option<u64>,
    /// Only the newest N events (before the kind filter).
    pub last: Option<usize>,
    pub agent: Option<String>,
    pub kind: Option<String>,
    pub limit: Option<usize>,
}

pub async fn health(State(s): State<AppState>) -> Api<HealthView> {
    Ok(Json(HealthView {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        agents: s.runtime.list_agents().await?.len(),
        sandbox_warning: s.runtime.sandbox_warning().map(str::to_owned),
        lost_events: s.runtime.lost_events(),
    }))
}

pub async fn dashboard_link(State(s): State<AppState>) -> Api<DashboardLinkView> {
    let code = s.logins.new_link();
    let scheme = match s.runtime.config().daemon.tls {
        Some(_) => "https",
        None => "http",
    };
    let base = match s.addr {
        addr if addr.ip().is_unspecified() => format!("{scheme}://127.0.0.1:{}", addr.port()),
        addr => format!("{scheme}://{addr}"),
    };
    Ok(Json(DashboardLinkView {
        url: format!("{base}/login/{code}"),
        expires_in_secs: reef_dashboard::LINK_LIFETIME.as_secs(),
    }))
}

pub async fn templates(State(s): State<AppState>) -> Api<Vec<TemplateView>> {
    Ok(Json(
        s.runtime
            .templates()
            .iter()
            .map(|t| TemplateView {
                name: t.name.clone(),
                description: t.description.clone(),
                model: t.model.clone(),
                tools: t.capabilities.tools.clone(),
                can_spawn: t.capabilities.spawn,
            })
            .collect(),
    ))
}

pub async fn list_agents(State(s): State<AppState>, grant: Grant) -> Api<Vec<AgentView>> {
    let agents = s.runtime.list_agents().await?;
    Ok(Json(
        agents
            .into_iter()
            .filter(|a| !grant.excludes(&a.name))
            .map(AgentView::from)
            .collect(),
    ))
}

pub async fn spawn_agent(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<SpawnBody>,
) -> Result<(StatusCode, Json<AgentView>), ApiError> {
    let spawned = s
        .runtime
        .spawn_agent(
            SpawnRequest {
                name: body.name,
                template: body.template,
                model: body.model,
                persona: body.persona,
                task: body.task,
                ephemeral: false,
                budget: None,
            },
            None,
        )
        .await?;
    let mut view = AgentView::from(spawned.agent);
    view.clamped = spawned.clamped;
    Ok((StatusCode::CREATED, Json(view)))
}

pub async fn get_agent(State(s): State<AppState>, Path(name): Path<String>) -> Api<AgentView> {
    let record = s.runtime.get_agent(&name).await?;
    let sandbox = s.runtime.agent_sandbox(&record);
    let mut view = AgentView::from(record);
    view.sandbox = Some(sandbox);
    Ok(Json(view))
}

pub async fn pause_agent(State(s): State<AppState>, Path(name): Path<String>) -> Api<AgentView> {
    Ok(Json(
        s.runtime
            .pause_agent(&name, "paused by the operator")
            .await?
            .into(),
    ))
}

pub async fn resume_agent(State(s): State<AppState>, Path(name): Path<String>) -> Api<AgentView> {
    Ok(Json(
        s.runtime
            .resume_agent(&name, "resumed by the operator")
            .await?
            .into(),
    ))
}

pub async fn stop_agent(State(s): State<AppState>, Path(name): Path<String>) -> Api<AgentView> {
    Ok(Json(
        s.runtime
            .stop_agent(&name, "stopped by the operator")
            .await?
            .into(),
    ))
}

pub async fn destroy_agent(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Params(q): Params<PurgeQuery>,
) -> Result<StatusCode, ApiError> {
    s.runtime.destroy_agent(&name, q.purge).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn set_model(
    State(s): State<AppState>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<ModelBody>,
) -> Api<AgentView> {
    Ok(Json(
        s.runtime.set_agent_model(&name, &body.model).await?.into(),
    ))
}

pub async fn compact_agent(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Api<CompactionView> {
    let msg = s.runtime.compact_agent(&name).await?;
    CompactionView::from_event(&name, msg)
        .map(Json)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the compaction was not reported",
            )
        })
}

pub async fn reset_agent(State(s): State<AppState>, Path(name): Path<String>) -> Api<ResetView> {
    let session = s.runtime.reset_agent(&name).await?;
    Ok(Json(ResetView {
        agent: name,
        session: session.to_string(),
    }))
}

pub async fn set_persona(
    State(s): State<AppState>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<PersonaBody>,
) -> Api<AgentView> {
    Ok(Json(
        s.runtime
            .set_agent_persona(&name, &body.persona)
            .await?
            .into(),
    ))
}

pub async fn send_message(
    State(s): State<AppState>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<MessageBody>,
) -> Result<(StatusCode, Json<SentView>), ApiError> {
    let key = body
        .key
        .unwrap_or_else(|| format!("op:{}", reef_core::SubmissionId::new()));
    let wait = body.expect_reply.then(|| {
        body.timeout_secs
            .unwrap_or(s.runtime.config().daemon.request_timeout_secs)
    });
    let sent = s
        .runtime
        .send_message(&name, Sender::Operator, &body.text, &key, wait)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(SentView {
            inbox_id: sent.inbox_id,
            duplicate: sent.duplicate,
            request_id: sent.request_id,
        }),
    ))
}

pub async fn inbox(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Params(q): Params<InboxQuery>,
) -> Api<Vec<InboxView>> {
    let agent = s.runtime.get_agent(&name).await?;
    let statuses = match q.status.as_deref() {
        None => vec![
            InboxStatus::Pending,
            InboxStatus::Processing,
            InboxStatus::Done,
        ],
        Some("pending") => vec![InboxStatus::Pending],
        Some("processing") => vec![InboxStatus::Processing],
        Some("done") => vec![InboxStatus::Done],
        Some(other) => {
            return Err(ApiError::invalid(
                "status",
                format!("{other:?} is not pending, processing or done"),
            ));
        }
    };
    let mut out = Vec::new();
    for status in statuses {
        out.extend(
            s.runtime
                .store()
                .inbox(&agent.id, status)
                .await?
                .into_iter()
                .map(InboxView::from),
        );
    }
    out.sort_by_key(|m| m.id);
    Ok(Json(out))
}

pub async fn transcript(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Api<Vec<TranscriptEntry>> {
    let agent = s.runtime.get_agent(&name).await?;
    let Some(session) = agent.session else {
        return Ok(Json(Vec::new()));
    };
    let messages = s.runtime.store().messages(&session).await?;
    Ok(Json(
        messages.into_iter().map(TranscriptEntry::from).collect(),
    ))
}

pub async fn list_rooms(State(s): State<AppState>) -> Api<Vec<RoomView>> {
    let rooms = s.runtime.list_rooms().await?;
    Ok(Json(rooms.into_iter().map(RoomView::from).collect()))
}

pub async fn create_room(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<RoomBody>,
) -> Result<(StatusCode, Json<RoomView>), ApiError> {
    let room = s.runtime.create_room(&body.name).await?;
    Ok((StatusCode::CREATED, Json(room.into())))
}

/// Room names start with `#`, which a URL path cannot carry unescaped; both `%23ops` and
/// `ops` name `#ops`.
fn room_name(raw: String) -> String {
    if raw.starts_with('#') {
        raw
    } else {
        format!("#{raw}")
    }
}

pub async fn join_room(
    State(s): State<AppState>,
    Path(room): Path<String>,
    JsonBody(body): JsonBody<JoinBody>,
) -> Result<StatusCode, ApiError> {
    s.runtime.join_room(&room_name(room), &body.agent).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn post_room(
    State(s): State<AppState>,
    Path(room): Path<String>,
    JsonBody(body): JsonBody<PostBody>,
) -> Result<(StatusCode, Json<PostedView>), ApiError> {
    let room = room_name(room);
    let key = body
        .key
        .unwrap_or_else(|| format!("op:{}", reef_core::SubmissionId::new()));
    let recipients = s
        .runtime
        .post_to_room(&room, Sender::Operator, &body.text, &key)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(PostedView { room, recipients })))
}

pub async fn list_questions(
    State(s): State<AppState>,
    Params(q): Params<AllQuery>,
) -> Api<Vec<PendingView>> {
    let kinds: Vec<&str> = match q.kind.as_deref() {
        // Requests are between agents; the operator's own show up when asked for.
        None => vec!["question", "approval", "breakpoint"],
        Some(k @ ("question" | "approval" | "request" | "breakpoint")) => vec![k],
        Some(other) => {
            return Err(ApiError::invalid(
                "kind",
                format!("{other:?} is not question, approval, request or breakpoint"),
            ));
        }
    };
    let items = s.runtime.list_pending(q.all).await?;
    Ok(Json(
        items
            .into_iter()
            .filter(|i| kinds.contains(&i.kind.as_str()))
            .map(PendingView::from)
            .collect(),
    ))
}

pub async fn get_question(State(s): State<AppState>, Path(id): Path<String>) -> Api<PendingView> {
    Ok(Json(s.runtime.get_pending(&id).await?.into()))
}

pub async fn answer(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<AnswerBody>,
) -> Api<PendingView> {
    Ok(Json(s.runtime.answer(&id, &body.text).await?.into()))
}

pub async fn approve(State(s): State<AppState>, Path(id): Path<String>) -> Api<PendingView> {
    Ok(Json(s.runtime.approve(&id).await?.into()))
}

pub async fn deny(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Api<PendingView> {
    // The body is optional: none, or `{"reason": "..."}`.
    let reason = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        serde_json::from_slice::<DenyBody>(&body)
            .map_err(|e| ApiError::invalid("body", e.to_string()))?
            .reason
    };
    Ok(Json(s.runtime.deny(&id, reason.as_deref()).await?.into()))
}

pub async fn cancel(State(s): State<AppState>, Path(id): Path<String>) -> Api<PendingView> {
    Ok(Json(s.runtime.cancel(&id).await?.into()))
}

pub async fn list_sessions(State(s): State<AppState>) -> Api<Vec<SessionView>> {
    let sessions = s.runtime.store().list_sessions(1000).await?;
    Ok(Json(
        sessions
            .into_iter()
            .map(|x| SessionView {
                id: x.id.to_string(),
                title: x.title,
                provider: x.provider,
                model: x.model,
                created_at: x.created_at,
                updated_at: x.updated_at,
                message_count: x.message_count,
                input_tokens: x.input_tokens,
                output_tokens: x.output_tokens,
            })
            .collect(),
    ))
}

pub async fn session_messages(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Api<Vec<TranscriptEntry>> {
    let id: SessionId = s.runtime.store().resolve_session(&id).await?;
    let messages = s.runtime.store().messages(&id).await?;
    Ok(Json(
        messages.into_iter().map(TranscriptEntry::from).collect(),
    ))
}

pub async fn events(
    State(s): State<AppState>,
    grant: Grant,
    Params(q): Params<EventsQuery>,
) -> Api<Vec<EventView>> {
    let agent = grant.narrow_agent(q.agent.as_deref())?;
    let filter = crate::sse::filter(&s, agent.as_deref(), q.kind.as_deref()).await?;
    let limit = q.limit.unwrap_or(1000).min(10_000);
    if let Some(n) = q.last {
        let tail = s
            .runtime
            .store()
            .events_tail(filter.agent.as_ref(), n.min(10_000))
            .await?;
        return Ok(Json(
            tail.into_iter()
                .filter(|e| filter.matches(e))
                .map(EventView::from)
                .collect(),
        ));
    }
    let mut out = Vec::new();
    let mut after = q.after.unwrap_or(0);
    // Read in pages so a kind filter still returns up to `limit` matches.
    loop {
        let page = s
            .runtime
            .store()
            .events_after(after, filter.agent.as_ref(), 1000)
            .await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        out.extend(
            page.into_iter()
                .filter(|e| filter.matches(e))
                .map(EventView::from),
        );
        if out.len() >= limit {
            out.truncate(limit);
            break;
        }
    }
    Ok(Json(out))
}
