//! The debugging endpoints of an agent (`/v1/agents/{name}/debug`): its breakpoints, where its
//! turn is paused, and the commands that let it go on.

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{JsonBody, Params};
use axum::Json;
use axum::extract::{Path, State};
use reef_runtime::{Breakpoint, DebugCommand, DebugStatus, PausedView};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

type Api<T> = Result<Json<T>, ApiError>;

/// An agent's breakpoints and the stop its turn waits at.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DebugView {
    pub agent: String,
    /// `round` (before every model request), `tool` (before every tool call) or
    /// `tool=NAME`.
    pub breakpoints: Vec<String>,
    /// Whether the agent stops before its next step of any kind (after `step`).
    pub stepping: bool,
    /// Where the agent waits; null while it runs or idles.
    pub paused: Option<StopView>,
}

/// A stop an agent's turn waits at; also a pending item of kind `breakpoint`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StopView {
    /// The pending item's id (`GET /v1/questions/{id}`).
    pub id: String,
    /// The turn's round: 1 is its first model request.
    pub round: u32,
    /// model_request or tool_call.
    pub at: String,
    pub tool: Option<String>,
    pub call_id: Option<String>,
    /// The call's arguments as they will run (after an edit).
    pub arguments: Option<Value>,
    pub edited: bool,
    /// The context's size now, in tokens, and the model's window.
    pub context_tokens: u64,
    pub window: Option<u64>,
    /// Messages in the context, system prompt included.
    pub context_messages: usize,
    /// The whole context (messages as stored), after `inspect` only.
    pub context: Option<Vec<Value>>,
}

impl From<DebugStatus> for DebugView {
    fn from(s: DebugStatus) -> DebugView {
        DebugView {
            agent: s.agent,
            breakpoints: s.breakpoints,
            stepping: s.stepping,
            paused: s.paused.map(StopView::from),
        }
    }
}

impl From<PausedView> for StopView {
    fn from(p: PausedView) -> StopView {
        StopView {
            id: p.id,
            round: p.round,
            at: p.at.to_owned(),
            tool: p.tool,
            call_id: p.call_id,
            arguments: p.arguments,
            edited: p.edited,
            context_tokens: p.context_tokens,
            window: p.window,
            context_messages: p.context_messages,
            context: p.context.map(|messages| {
                messages
                    .iter()
                    .map(|m| serde_json::to_value(m).unwrap_or(Value::Null))
                    .collect()
            }),
        }
    }
}

/// The breakpoints to set; an empty list ends debugging.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BreakpointsBody {
    /// `round`, `tool` or `tool=NAME`.
    pub breakpoints: Vec<String>,
}

/// A command for a paused agent.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DebugCommandBody {
    /// step, continue, skip, edit or inspect.
    pub command: String,
    /// For skip: the error text the model gets instead of the call's result.
    pub error: Option<String>,
    /// For edit: the call's new arguments (a JSON object).
    pub arguments: Option<Value>,
    /// The id of the stop the command is meant for; with it, a command that arrives after
    /// the agent moved on to another stop is refused (409).
    pub stop: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitQuery {
    /// Seconds to wait for the agent to pause (at most 60).
    pub wait: Option<u64>,
}

pub async fn status(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Params(q): Params<WaitQuery>,
) -> Api<DebugView> {
    let status = match q.wait {
        Some(secs) => {
            s.runtime
                .debug_wait(&name, Duration::from_secs(secs))
                .await?
        }
        None => s.runtime.debug_status(&name).await?,
    };
    Ok(Json(status.into()))
}

pub async fn set(
    State(s): State<AppState>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<BreakpointsBody>,
) -> Api<DebugView> {
    let breakpoints = body
        .breakpoints
        .iter()
        .map(|b| Breakpoint::parse(b))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(s.runtime.debug_set(&name, breakpoints).await?.into()))
}

pub async fn off(State(s): State<AppState>, Path(name): Path<String>) -> Api<DebugView> {
    Ok(Json(s.runtime.debug_set(&name, Vec::new()).await?.into()))
}

pub async fn command(
    State(s): State<AppState>,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<DebugCommandBody>,
) -> Api<DebugView> {
    let command = match body.command.as_str() {
        "step" => DebugCommand::Step,
        "continue" => DebugCommand::Continue,
        "inspect" => DebugCommand::Inspect,
        "skip" => DebugCommand::Skip {
            error: body
                .error
                .filter(|e| !e.trim().is_empty())
                .ok_or_else(|| ApiError::invalid("error", "skip needs the error text"))?,
        },
        "edit" => DebugCommand::Edit {
            arguments: body
                .arguments
                .ok_or_else(|| ApiError::invalid("arguments", "edit needs the new arguments"))?,
        },
        other => {
            return Err(ApiError::invalid(
                "command",
                format!("`{other}` is not one of step, continue, skip, edit, inspect"),
            ));
        }
    };
    Ok(Json(
        s.runtime
            .debug_command(&name, command, body.stop.as_deref())
            .await?
            .into(),
    ))
}
