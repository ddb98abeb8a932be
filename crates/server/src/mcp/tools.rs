//! The tools reef offers to MCP hosts, each answered with the runtime calls and checks of the
//! matching HTTP route, and their input schemas.

use crate::dto::{AgentView, PendingView};
use reef_core::{ToolCallId, ToolContext};
use reef_mcp::{CallResult, Content, HostError, ToolInfo};
use reef_runtime::{Runtime, RuntimeError, Sender, SpawnRequest};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::time::Duration;

/// The template of an agent spawned without one.
const DEFAULT_TEMPLATE: &str = "worker";
/// How often a waiting `send_message` looks at its request.
const REPLY_POLL: Duration = Duration::from_millis(100);

pub(super) fn list() -> Vec<ToolInfo> {
    let tool = |name: &str, description: &str, schema: Value| ToolInfo {
        name: name.into(),
        description: Some(description.into()),
        input_schema: schema.as_object().cloned().unwrap_or_default(),
    };
    let agent = json!({"type": "string", "description": "The agent's name."});
    vec![
        tool(
            "list_agents",
            "List reef's agents with their template, state and budget.",
            json!({"type": "object", "properties": {}}),
        ),
        tool(
            "spawn_agent",
            "Start a new long-lived agent from a template, optionally with a first task.",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "a-z 0-9 - _, unique."},
                "template": {"type": "string", "description": "A template name (default: worker)."},
                "task": {"type": "string", "description": "A first message for the agent."}
            }, "required": ["name"]}),
        ),
        tool(
            "send_message",
            "Send a message to an agent's inbox. With wait, wait for its reply (up to \
             timeout_secs) and return it.",
            json!({"type": "object", "properties": {
                "agent": agent,
                "text": {"type": "string"},
                "wait": {"type": "boolean", "description": "Wait for the agent's reply."},
                "timeout_secs": {"type": "integer", "minimum": 1}
            }, "required": ["agent", "text"]}),
        ),
        tool(
            "agent_status",
            "One agent's state, template, model, budget and what it has spent.",
            json!({"type": "object", "properties": {"agent": agent}, "required": ["agent"]}),
        ),
        tool(
            "list_questions",
            "What agents are waiting on the operator for: questions, approvals, requests.",
            json!({"type": "object", "properties": {
                "all": {"type": "boolean", "description": "Include answered and expired ones."}
            }}),
        ),
        tool(
            "answer_question",
            "Answer a question an agent asked the operator (its id from list_questions).",
            json!({"type": "object", "properties": {
                "id": {"type": "string"}, "answer": {"type": "string"}
            }, "required": ["id", "answer"]}),
        ),
        tool(
            "memory_search",
            "Search reef's long-term memory (hybrid keyword and meaning search).",
            json!({"type": "object", "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}
            }, "required": ["query"]}),
        ),
        tool(
            "memory_save",
            "Save a fact to reef's shared long-term memory.",
            json!({"type": "object", "properties": {
                "text": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}}
            }, "required": ["text"]}),
        ),
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Spawn {
    name: String,
    template: Option<String>,
    task: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message {
    agent: String,
    text: String,
    #[serde(default)]
    wait: bool,
    timeout_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentArg {
    agent: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Questions {
    #[serde(default)]
    all: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    id: String,
    answer: String,
}

/// Runs tool `name`. A refusal by the runtime is an error result the client reads.
pub(super) async fn call(
    rt: &Runtime,
    name: &str,
    args: Map<String, Value>,
) -> Result<CallResult, HostError> {
    let args = Value::Object(args);
    let outcome = match name {
        "list_agents" => rt.list_agents().await.map(|agents| {
            let views: Vec<AgentView> = agents.into_iter().map(AgentView::from).collect();
            json!(views)
        }),
        "spawn_agent" => {
            let a: Spawn = parse(args)?;
            rt.spawn_agent(
                SpawnRequest {
                    name: a.name,
                    template: a.template.unwrap_or_else(|| DEFAULT_TEMPLATE.into()),
                    model: None,
                    persona: None,
                    task: a.task,
                    ephemeral: false,
                    budget: None,
                },
                None,
            )
            .await
            .map(|spawned| {
                let mut view = AgentView::from(spawned.agent);
                view.clamped = spawned.clamped;
                json!(view)
            })
        }
        "send_message" => return send(rt, parse(args)?).await,
        "agent_status" => {
            let a: AgentArg = parse(args)?;
            rt.get_agent(&a.agent)
                .await
                .map(|r| json!(AgentView::from(r)))
        }
        "list_questions" => {
            let a: Questions = parse(args)?;
            rt.list_pending(a.all).await.map(|items| {
                let views: Vec<PendingView> = items.into_iter().map(PendingView::from).collect();
                json!(views)
            })
        }
        "answer_question" => {
            let a: Answer = parse(args)?;
            rt.answer(&a.id, &a.answer)
                .await
                .map(|item| json!(PendingView::from(item)))
        }
        "memory_search" | "memory_save" => return memory(rt, name, args).await,
        other => return Err(HostError::Invalid(format!("reef has no tool `{other}`"))),
    };
    Ok(match outcome {
        Ok(value) => CallResult {
            content: vec![Content::Text(value.to_string())],
            structured: Some(json!({"result": value})),
            is_error: false,
        },
        Err(err) => refused(&err),
    })
}

/// `send_message`: delivered like `POST /v1/agents/NAME/messages`; with `wait`, the reply
/// recorded on the request is awaited like `reef agent send --wait` does.
async fn send(rt: &Runtime, a: Message) -> Result<CallResult, HostError> {
    let key = format!("mcp:{}", reef_core::SubmissionId::new());
    let reply_within = a.wait.then(|| {
        a.timeout_secs
            .unwrap_or(rt.config().daemon.request_timeout_secs)
    });
    let sent = match rt
        .send_message(&a.agent, Sender::Operator, &a.text, &key, reply_within)
        .await
    {
        Ok(sent) => sent,
        Err(err) => return Ok(refused(&err)),
    };
    let Some(request) = sent.request_id.clone() else {
        return Ok(text(format!(
            "queued as message #{} for {}",
            sent.inbox_id.unwrap_or_default(),
            a.agent
        )));
    };
    // The request expires on its own after `reply_within`; this bounds the wait in any case.
    let deadline = tokio::time::Instant::now()
        + Duration::from_secs(reply_within.unwrap_or_default().saturating_add(5));
    let mut stopping = rt.stopping();
    loop {
        if tokio::time::Instant::now() >= deadline || *stopping.borrow() {
            let mut result = text(format!(
                "no reply from {} yet (request {request}; list_questions shows it)",
                a.agent
            ));
            result.is_error = true;
            return Ok(result);
        }
        let item = match rt.get_pending(&request).await {
            Ok(item) => item,
            Err(err) => return Ok(refused(&err)),
        };
        match item.status.as_str() {
            "pending" => {
                tokio::select! {
                    () = tokio::time::sleep(REPLY_POLL) => {}
                    _ = stopping.changed() => {}
                }
            }
            "answered" => return Ok(text(item.answer.unwrap_or_default())),
            other => {
                let mut result = text(format!(
                    "no reply from {}: the request was {other}",
                    a.agent
                ));
                result.is_error = true;
                return Ok(result);
            }
        }
    }
}

/// The memory tools of the operator's own agent, as reef's agents use them.
async fn memory(rt: &Runtime, name: &str, args: Value) -> Result<CallResult, HostError> {
    let tool = rt
        .operator_memory_tools()
        .into_iter()
        .find(|t| t.spec().name == name)
        .ok_or_else(|| HostError::NotFound(format!("memory is not available: no `{name}`")))?;
    let ctx = ToolContext {
        workspace: rt.config().home.clone(),
        session_id: reef_core::SessionId::new(),
        call_id: ToolCallId::new(),
        read_only: Vec::new(),
    };
    Ok(match tool.call(&ctx, args).await {
        Ok(out) => text(out),
        Err(err) => {
            let mut result = text(err.to_string());
            result.is_error = true;
            result
        }
    })
}

fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, HostError> {
    serde_json::from_value(args).map_err(|e| HostError::Invalid(format!("arguments: {e}")))
}

fn text(text: String) -> CallResult {
    CallResult {
        content: vec![Content::Text(text)],
        structured: None,
        is_error: false,
    }
}

fn refused(err: &RuntimeError) -> CallResult {
    CallResult {
        content: vec![Content::Text(err.to_string())],
        structured: None,
        is_error: true,
    }
}
