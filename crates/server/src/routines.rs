//! `/v1/routines` and `/v1/jobs`: routines created, edited, enabled, disabled, deleted, run by
//! hand and read with their fire history; jobs listed, inspected and cancelled. A routine's
//! body uses the keys of `[routines.NAME]` in `reef.toml`.

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, Params};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use reef_config::RoutineFields;
use reef_runtime::{RoutineRequest, RoutineView};
use reef_store::{Claimed, FireRecord, JobRecord, JobState};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

type Api<T> = Result<Json<T>, ApiError>;

/// A routine to create: its name and the keys of `[routines.NAME]`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateRoutineBody {
    pub name: String,
    #[serde(flatten)]
    pub fields: RoutineFields,
    /// Keys that are not a routine's (refused; flattening cannot refuse them itself).
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: std::collections::BTreeMap<String, serde_json::Value>,
}

/// A routine with its definition and state.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RoutineDto {
    pub name: String,
    pub enabled: bool,
    /// config, template, operator or agent.
    pub source: String,
    /// The agent that scheduled it.
    pub owner: Option<String>,
    /// The definition: trigger, action, guardrails.
    pub spec: serde_json::Value,
    /// Failed runs in a row.
    pub failures: u32,
    pub disabled_reason: Option<String>,
    /// The next timed fire (RFC 3339).
    pub next: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<RoutineView> for RoutineDto {
    fn from(v: RoutineView) -> Self {
        let r = v.record;
        RoutineDto {
            name: r.name,
            enabled: r.enabled,
            source: r.source.as_str().to_owned(),
            owner: r.owner.map(|o| o.to_string()),
            spec: serde_json::to_value(&r.spec).unwrap_or_default(),
            failures: r.failures,
            disabled_reason: r.disabled_reason,
            next: v.next,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// One fire of a routine.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FireDto {
    /// Its identity within the routine: `at:MS`, `event:SEQ`, `hook:…`, `manual:…`.
    pub key: String,
    /// The scheduled instant (RFC 3339).
    pub scheduled: String,
    /// `run` or `skipped`.
    pub outcome: String,
    pub reason: Option<String>,
    pub job_id: Option<u64>,
    /// The run's job state.
    pub state: Option<String>,
    pub claimed_at: String,
}

impl From<FireRecord> for FireDto {
    fn from(f: FireRecord) -> Self {
        FireDto {
            key: f.key,
            scheduled: rfc3339_ms(f.scheduled_ms),
            outcome: f.outcome,
            reason: f.reason,
            job_id: f.job_id,
            state: f.state,
            claimed_at: f.claimed_at,
        }
    }
}

/// A routine run or an agent's turn.
#[derive(Debug, Serialize, JsonSchema)]
pub struct JobDto {
    pub id: u64,
    /// routine, turn or heartbeat.
    pub kind: String,
    /// pending, running, completed, failed or cancelled.
    pub state: String,
    pub routine: Option<String>,
    pub agent: Option<String>,
    pub inbox_id: Option<u64>,
    /// The fire's scheduled instant (RFC 3339).
    pub scheduled: Option<String>,
    /// When a spawned run is stopped (RFC 3339).
    pub deadline: Option<String>,
    pub reason: Option<String>,
    pub result: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
}

impl From<JobRecord> for JobDto {
    fn from(j: JobRecord) -> Self {
        JobDto {
            id: j.id,
            kind: j.kind.as_str().to_owned(),
            state: j.state.as_str().to_owned(),
            routine: j.routine,
            agent: j.agent_name,
            inbox_id: j.inbox_id,
            scheduled: j.scheduled_ms.map(rfc3339_ms),
            deadline: j.deadline_ms.map(rfc3339_ms),
            reason: j.reason,
            result: j.result,
            created_at: j.created_at,
            started_at: j.started_at,
            ended_at: j.ended_at,
        }
    }
}

/// What a run by hand did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunDto {
    /// `started`, `failed` or `skipped`.
    pub outcome: String,
    pub job_id: Option<u64>,
    pub reason: Option<String>,
}

fn rfc3339_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    pub state: Option<String>,
    pub limit: Option<usize>,
}

fn spec_of(
    s: &AppState,
    fields: RoutineFields,
) -> Result<(reef_core::RoutineSpec, bool), ApiError> {
    reef_config::routine_spec(fields, &s.runtime.config().scheduler)
        .map_err(|e| ApiError::invalid(&e.field, e.message))
}

pub async fn list(State(s): State<AppState>) -> Api<Vec<RoutineDto>> {
    let routines = s.runtime.list_routines().await?;
    Ok(Json(routines.into_iter().map(RoutineDto::from).collect()))
}

pub async fn create(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<CreateRoutineBody>,
) -> Result<(StatusCode, Json<RoutineDto>), ApiError> {
    if let Some(key) = body.unknown.keys().next() {
        return Err(ApiError::invalid(
            key,
            format!("`{key}` is not a routine key; see [routines.NAME] in the configuration"),
        ));
    }
    let (spec, enabled) = spec_of(&s, body.fields)?;
    let name = body.name;
    s.runtime
        .create_routine(
            RoutineRequest {
                name: name.clone(),
                spec,
                enabled,
            },
            None,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(s.runtime.routine(&name).await?.into()),
    ))
}

pub async fn get(State(s): State<AppState>, Path(name): Path<String>) -> Api<RoutineDto> {
    Ok(Json(s.runtime.routine(&name).await?.into()))
}

pub async fn edit(
    State(s): State<AppState>,
    Path(name): Path<String>,
    JsonBody(fields): JsonBody<RoutineFields>,
) -> Api<RoutineDto> {
    let enabled = fields.enabled;
    let (spec, _) = spec_of(&s, fields)?;
    s.runtime.edit_routine(&name, spec).await?;
    if let Some(enabled) = enabled {
        s.runtime.set_routine_enabled(&name, enabled).await?;
    }
    Ok(Json(s.runtime.routine(&name).await?.into()))
}

pub async fn remove(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    s.runtime.delete_routine(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn enable(State(s): State<AppState>, Path(name): Path<String>) -> Api<RoutineDto> {
    s.runtime.set_routine_enabled(&name, true).await?;
    Ok(Json(s.runtime.routine(&name).await?.into()))
}

pub async fn disable(State(s): State<AppState>, Path(name): Path<String>) -> Api<RoutineDto> {
    s.runtime.set_routine_enabled(&name, false).await?;
    Ok(Json(s.runtime.routine(&name).await?.into()))
}

pub async fn run(State(s): State<AppState>, Path(name): Path<String>) -> Api<RunDto> {
    let dto = match s.runtime.run_routine(&name).await? {
        Claimed::Job { job_id, .. } => RunDto {
            outcome: "started".into(),
            job_id: Some(job_id),
            reason: None,
        },
        Claimed::Failed { job_id, reason } => RunDto {
            outcome: "failed".into(),
            job_id: Some(job_id),
            reason: Some(reason),
        },
        Claimed::Skipped | Claimed::AlreadyClaimed => RunDto {
            outcome: "skipped".into(),
            job_id: None,
            reason: s
                .runtime
                .routine_history(&name, 1)
                .await?
                .into_iter()
                .next()
                .and_then(|f| f.reason),
        },
    };
    Ok(Json(dto))
}

pub async fn history(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Params(q): Params<ListQuery>,
) -> Api<Vec<FireDto>> {
    let fires = s
        .runtime
        .routine_history(&name, q.limit.unwrap_or(50).min(10_000))
        .await?;
    Ok(Json(fires.into_iter().map(FireDto::from).collect()))
}

pub async fn jobs(State(s): State<AppState>, Params(q): Params<ListQuery>) -> Api<Vec<JobDto>> {
    let state = match q.state.as_deref() {
        None => None,
        Some(text) => Some(JobState::parse(text).ok_or_else(|| {
            ApiError::invalid(
                "state",
                format!("`{text}` is not pending, running, completed, failed or cancelled"),
            )
        })?),
    };
    let jobs = s
        .runtime
        .list_jobs(state, q.limit.unwrap_or(50).min(10_000))
        .await?;
    Ok(Json(jobs.into_iter().map(JobDto::from).collect()))
}

pub async fn job(State(s): State<AppState>, Path(id): Path<u64>) -> Api<JobDto> {
    Ok(Json(s.runtime.job(id).await?.into()))
}

pub async fn cancel_job(State(s): State<AppState>, Path(id): Path<u64>) -> Api<JobDto> {
    Ok(Json(s.runtime.cancel_job(id).await?.into()))
}
