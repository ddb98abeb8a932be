//! The OpenAI-compatible endpoint, so any OpenAI client can talk to an agent:
//! `POST /v1/chat/completions` with `model = "agent:NAME"` (the agent's own session: the
//! request's last user message goes to its inbox) or `"template:NAME"` (a one-off agent per
//! request, with the earlier messages as context, destroyed when done), streamed as
//! `chat.completion.chunk` events ending in `[DONE]` or answered at once, with usage; and
//! `GET /v1/models`, the agents and templates. The answer is the turn's final text, the
//! same the transcript stores; a stream starts when the turn has ended, so what it carries
//! never differs from it.

use crate::AppState;
use crate::auth::Grant;
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::scope::{Access, forbidden};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use reef_core::{AgentId, TurnOutcome};
use reef_runtime::{Runtime, Sender, SpawnRequest};
use reef_security::api_token::Scope;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// The most bytes of the message an agent receives.
pub const MAX_INPUT_BYTES: usize = 16 * 1024;
/// How long a request waits for the agent's turn to end.
const TURN_WAIT: Duration = Duration::from_secs(600);

/// A chat completion request (the fields reef reads; others are accepted and ignored).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ChatRequest {
    /// `agent:NAME` or `template:NAME`.
    pub model: String,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StreamOptions {
    /// Send a last chunk with the usage.
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ChatMessage {
    pub role: String,
    /// Text, or an array of parts of which the `text` ones are read.
    #[serde(default)]
    pub content: Value,
}

/// `GET /v1/models`: what `model` may name.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ModelList {
    pub object: String,
    pub data: Vec<ModelEntry>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ModelEntry {
    /// `agent:NAME` or `template:NAME`.
    pub id: String,
    pub object: String,
    pub created: i64,
    pub owned_by: String,
}

pub async fn models(State(s): State<AppState>, grant: Grant) -> Result<Json<ModelList>, ApiError> {
    let entry = |id: String| ModelEntry {
        id,
        object: "model".into(),
        created: 0,
        owned_by: "reef".into(),
    };
    let agents = s.runtime.list_agents().await?;
    let data = agents
        .iter()
        .filter(|a| !a.state.is_final() && !a.ephemeral && !grant.excludes(&a.name))
        .map(|a| entry(format!("agent:{}", a.name)))
        .chain(
            s.runtime
                .templates()
                .iter()
                // Starting a one-off agent is an operator's call.
                .filter(|_| grant.scope == Scope::Operator)
                .map(|t| entry(format!("template:{}", t.name))),
        )
        .collect();
    Ok(Json(ModelList {
        object: "list".into(),
        data,
    }))
}

/// What a finished turn gave.
struct Answer {
    text: String,
    usage: Value,
}

pub async fn completions(
    State(s): State<AppState>,
    grant: Grant,
    JsonBody(req): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    let rt = &s.runtime;
    // An agent's token talks to that agent only, and starts no one-off agents.
    if let Some(own) = grant.scope.agent()
        && req.model.strip_prefix("agent:") != Some(own)
    {
        return Err(forbidden(
            &grant,
            &format!("model {}", req.model),
            Access::Talk,
        ));
    }
    let last = req
        .messages
        .iter()
        .rposition(|m| m.role == "user")
        .ok_or_else(|| ApiError::invalid("messages", "holds no user message"))?;
    let input = text_of(&req.messages[last].content);
    if input.trim().is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "the last user message is empty",
        ));
    }
    if input.len() > MAX_INPUT_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the last user message has {} bytes; an agent takes at most {MAX_INPUT_BYTES}",
                input.len()
            ),
        ));
    }
    let id = format!(
        "chatcmpl-{}",
        AgentId::new().as_str().trim_start_matches("agt_")
    );
    // Subscribed before the message is sent, so the end of its turn cannot be missed.
    let mut events = rt.bus().subscribe();
    let (agent, inbox_id) = match req.model.split_once(':') {
        Some(("agent", name)) => {
            let sent = rt
                .send_message(name, Sender::Channel("openai"), &input, &id, None)
                .await?;
            (rt.get_agent(name).await?.id, sent.inbox_id)
        }
        Some(("template", template)) => {
            let task = with_context(&req.messages[..last], &input);
            let spawned = rt
                .spawn_agent(
                    SpawnRequest {
                        name: format!("chat-{}", &id[id.len().saturating_sub(12)..]),
                        template: template.to_owned(),
                        task: Some(task),
                        ephemeral: true,
                        ..SpawnRequest::default()
                    },
                    None,
                )
                .await?;
            (spawned.agent.id, None)
        }
        _ => {
            return Err(ApiError::invalid(
                "model",
                format!(
                    "`{}` is neither agent:NAME nor template:NAME (GET /v1/models lists them)",
                    req.model
                ),
            ));
        }
    };
    let answer = tokio::time::timeout(TURN_WAIT, wait_turn(rt, &mut events, &agent, inbox_id))
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                format!("the agent did not answer within {}s", TURN_WAIT.as_secs()),
            )
        })??;
    // What leaves for the client is looked at first.
    let mut answer = answer;
    answer.text = match rt
        .screen_outgoing(&answer.text, "openai", Some(agent.as_str()))
        .await
    {
        reef_runtime::Outgoing::Send(text) => text,
        reef_runtime::Outgoing::Withheld(why) => format!("[answer withheld: {why}]"),
    };
    let created = reef_store::unix_now();
    let usage = json!({
        "prompt_tokens": answer.usage["input_tokens"].as_u64().unwrap_or(0),
        "completion_tokens": answer.usage["output_tokens"].as_u64().unwrap_or(0),
        "total_tokens": answer.usage["input_tokens"].as_u64().unwrap_or(0)
            + answer.usage["output_tokens"].as_u64().unwrap_or(0),
    });
    if !req.stream {
        return Ok(Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": req.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": answer.text},
                "finish_reason": "stop",
            }],
            "usage": usage,
        }))
        .into_response());
    }
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": created,
               "model": req.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    chunks.extend(
        pieces(&answer.text)
            .into_iter()
            .map(|piece| chunk(json!({"content": piece}), Value::Null)),
    );
    chunks.push(chunk(json!({}), json!("stop")));
    if include_usage {
        chunks.push(
            json!({"id": id, "object": "chat.completion.chunk", "created": created,
                           "model": req.model, "choices": [], "usage": usage}),
        );
    }
    let mut events: Vec<Result<Event, Infallible>> = chunks
        .iter()
        .map(|c| Ok(Event::default().data(c.to_string())))
        .collect();
    events.push(Ok(Event::default().data("[DONE]")));
    Ok(Sse::new(futures::stream::iter(events)).into_response())
}

/// Waits for the end of the turn that read message `inbox_id` of `agent` (any turn of a
/// one-off agent when `None`).
async fn wait_turn(
    rt: &Runtime,
    events: &mut tokio::sync::broadcast::Receiver<reef_store::StoredEvent>,
    agent: &AgentId,
    inbox_id: Option<u64>,
) -> Result<Answer, ApiError> {
    let mut stopping = rt.stopping();
    // A failed turn is tried again (`turn.retry_scheduled`) unless it was the last attempt.
    let mut failed: Option<ApiError> = None;
    loop {
        let received = tokio::select! {
            received = events.recv() => received,
            _ = stopping.changed() => Err(RecvError::Closed),
        };
        let event = match received {
            Ok(event) => event,
            // Missed events are in the history; the turn's end is looked up there.
            Err(RecvError::Lagged(_)) => {
                let tail = rt
                    .store()
                    .events_tail(Some(agent), 1000)
                    .await
                    .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
                match tail.into_iter().rev().find(|e| ends(e, agent, inbox_id)) {
                    Some(event) => event,
                    None => continue,
                }
            }
            Err(RecvError::Closed) => {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the daemon is stopping; the message runs again when it restarts",
                ));
            }
        };
        if event.agent_id.as_ref() != Some(agent) {
            continue;
        }
        if let Some(error) = failed.take() {
            if event.kind == "turn.retry_scheduled" {
                continue;
            }
            return Err(error);
        }
        if event.kind == "turn.interrupted" && reads(&event, inbox_id) {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the agent's turn was interrupted; the message runs again later",
            ));
        }
        if !ends(&event, agent, inbox_id) {
            continue;
        }
        let outcome: TurnOutcome =
            serde_json::from_value(event.data["outcome"].clone()).map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    format!("unreadable turn outcome: {e}"),
                )
            })?;
        let error = ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!(
                "the agent's turn ended without an answer: {}",
                event.data["outcome"]
            ),
        );
        match outcome {
            TurnOutcome::Completed { text } => {
                return Ok(Answer {
                    text,
                    usage: event.data["usage"].clone(),
                });
            }
            TurnOutcome::Failed { .. } => failed = Some(error),
            _ => return Err(error),
        }
    }
}

/// Whether `event` concerns message `inbox_id` (any message when `None`).
fn reads(event: &reef_store::StoredEvent, inbox_id: Option<u64>) -> bool {
    inbox_id.is_none_or(|id| {
        event.data["inbox_ids"]
            .as_array()
            .is_some_and(|ids| ids.iter().any(|i| i.as_u64() == Some(id)))
    })
}

fn ends(event: &reef_store::StoredEvent, agent: &AgentId, inbox_id: Option<u64>) -> bool {
    event.kind == "turn.ended" && event.agent_id.as_ref() == Some(agent) && reads(event, inbox_id)
}

/// The text of a message's content: a string, or the `text` parts of an array.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A one-off agent's task: the conversation before, then the last user message.
fn with_context(before: &[ChatMessage], input: &str) -> String {
    let context: Vec<String> = before
        .iter()
        .map(|m| format!("[{}] {}", m.role, text_of(&m.content)))
        .filter(|line| !line.ends_with("] "))
        .collect();
    if context.is_empty() {
        return input.to_owned();
    }
    format!(
        "The conversation so far, for context:\n{}\n\nThe message to answer:\n{input}",
        context.join("\n")
    )
}

/// The answer in word-sized pieces for the stream; joined, they are the answer exactly.
fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if c.is_whitespace() && current.len() >= 16 {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_back_to_the_answer() {
        let text = "A reef is a ridge of rock, sand or coral near the surface of the sea.\n\nOK";
        assert_eq!(pieces(text).concat(), text);
        assert!(pieces(text).len() > 2);
        assert!(pieces("").is_empty());
    }

    #[test]
    fn content_parts_and_context_are_read() {
        let parts = json!([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]);
        assert_eq!(text_of(&parts), "a\nb");
        let before = vec![
            ChatMessage {
                role: "system".into(),
                content: json!("be brief"),
            },
            ChatMessage {
                role: "user".into(),
                content: json!("hi"),
            },
        ];
        let task = with_context(&before, "and now?");
        assert!(task.contains("[system] be brief\n[user] hi"), "{task}");
        assert!(task.ends_with("The message to answer:\nand now?"));
        assert_eq!(with_context(&[], "x"), "x");
    }
}
