//! The tools a daemon agent gets from the runtime: talking to other agents and rooms, asking
//! the operator, and — for agents that may spawn — managing child agents. Every send made
//! while processing an inbox message is keyed by that message and its position in the turn,
//! so when a message is processed again after a crash, its sends are not delivered twice.

use crate::agents::SpawnRequest;
use crate::kernel::{Inner, Runtime, lock};
use crate::messaging::Sender;
use async_trait::async_trait;
use reef_core::{AgentId, Tool, ToolContext, ToolError, ToolSpec};
use reef_store::AgentRecord;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, Weak};

/// The runtime tools, by public name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    MessageAgent,
    Broadcast,
    AskOperator,
    ListAgents,
    SpawnAgent,
    StopAgent,
    SetAgentModel,
}

impl Kind {
    /// Tools every agent gets (subject to its capabilities' tool list).
    pub const COMMON: [Kind; 4] = [
        Kind::MessageAgent,
        Kind::Broadcast,
        Kind::AskOperator,
        Kind::ListAgents,
    ];
    /// Tools only agents with the spawn capability get.
    pub const MANAGER: [Kind; 3] = [Kind::SpawnAgent, Kind::StopAgent, Kind::SetAgentModel];
}

/// Which agent the tools act for, and which inbox message it is processing.
pub(crate) struct AgentCtx {
    pub runtime: Weak<Inner>,
    pub agent: AgentId,
    pub current: Mutex<Option<Current>>,
}

/// The inbox message being processed, how many keyed actions it has taken, and the
/// questions it asked.
#[derive(Clone, Debug)]
pub(crate) struct Current {
    pub inbox_id: u64,
    /// The request the message carries, if any.
    pub request_id: Option<String>,
    /// How many times each distinct action (tool + arguments) was taken so far.
    pub actions: std::collections::HashMap<u64, u32>,
    pub questions: Vec<String>,
}

impl AgentCtx {
    /// The idempotency key of an action taken while processing the current message: the
    /// message, what the action is (`tool` and its canonical `args`) and how many identical
    /// actions came before it in this attempt. Processing the message again after a crash
    /// gives the same action the same key (so it is not delivered twice), while a different
    /// action — or the same one taken once more — gets a new key.
    pub(crate) fn next_key(&self, call: &ToolContext, tool: &str, args: &Value) -> String {
        let mut current = lock(&self.current);
        match current.as_mut() {
            Some(c) => {
                let what = crate::messaging::fnv64(&format!("{tool}\0{args}"));
                let n = c.actions.entry(what).or_insert(0);
                let key = format!("{}:{}:{what:016x}:{n}", self.agent, c.inbox_id);
                *n += 1;
                key
            }
            None => format!("{}:call:{}", self.agent, call.call_id),
        }
    }

    pub(crate) async fn me(&self) -> Result<(Runtime, AgentRecord), ToolError> {
        let runtime = Runtime::from_weak(&self.runtime).map_err(failed)?;
        let me = runtime.agent(self.agent.as_str()).await.map_err(failed)?;
        Ok((runtime, me))
    }
}

/// One runtime tool bound to an agent.
pub(crate) struct RuntimeTool {
    pub kind: Kind,
    pub ctx: Arc<AgentCtx>,
}

fn failed(err: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(err.to_string())
}

fn parse<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageArgs {
    to: String,
    text: String,
    #[serde(default)]
    expect_reply: bool,
    timeout_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BroadcastArgs {
    room: String,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskArgs {
    question: String,
    #[serde(default)]
    options: Vec<String>,
    ttl_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnArgs {
    name: String,
    template: String,
    task: Option<String>,
    persona: Option<String>,
    model: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameArgs {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelArgs {
    name: String,
    model: String,
}

#[async_trait]
impl Tool for RuntimeTool {
    fn spec(&self) -> ToolSpec {
        let (name, description, parameters) = match self.kind {
            Kind::MessageAgent => (
                "message_agent",
                "Send a message to another agent's inbox (it wakes and handles it). With \
                 expect_reply, its answer comes back to your inbox later as a message (or a \
                 notice that it did not answer in time); this call returns at once.",
                json!({"type": "object", "properties": {
                    "to": {"type": "string", "description": "the agent's name"},
                    "text": {"type": "string"},
                    "expect_reply": {"type": "boolean", "description": "ask for a reply"},
                    "timeout_secs": {"type": "integer", "minimum": 1,
                                     "description": "how long to wait for the reply"}},
                    "required": ["to", "text"], "additionalProperties": false}),
            ),
            Kind::Broadcast => (
                "broadcast",
                "Post a message to a room: every member but you gets it (#agents has every \
                 agent).",
                json!({"type": "object", "properties": {
                    "room": {"type": "string", "description": "e.g. #agents"},
                    "text": {"type": "string"}},
                    "required": ["room", "text"], "additionalProperties": false}),
            ),
            Kind::AskOperator => (
                "ask_operator",
                "Ask the human operator a question. Returns an id at once; the answer arrives \
                 later in your inbox. Offer options when the answer is a choice.",
                json!({"type": "object", "properties": {
                    "question": {"type": "string"},
                    "options": {"type": "array", "items": {"type": "string"}},
                    "ttl_secs": {"type": "integer", "minimum": 1,
                                 "description": "give up after this many seconds"}},
                    "required": ["question"], "additionalProperties": false}),
            ),
            Kind::ListAgents => (
                "list_agents",
                "List every agent: name, template, state, parent, model.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ),
            Kind::SpawnAgent => (
                "spawn_agent",
                "Create a child agent from a template (worker, coder, researcher, quick, \
                 creative, …) and optionally give it its first task. Its tools and budget never \
                 exceed yours.",
                json!({"type": "object", "properties": {
                    "name": {"type": "string", "description": "a-z 0-9 - _"},
                    "template": {"type": "string"},
                    "task": {"type": "string", "description": "first message for it"},
                    "persona": {"type": "string"},
                    "model": {"type": "string", "description": "a configured provider"}},
                    "required": ["name", "template"], "additionalProperties": false}),
            ),
            Kind::StopAgent => (
                "stop_agent",
                "Terminate one of your child agents.",
                json!({"type": "object", "properties": {"name": {"type": "string"}},
                       "required": ["name"], "additionalProperties": false}),
            ),
            Kind::SetAgentModel => (
                "set_agent_model",
                "Switch one of your child agents to another configured model provider.",
                json!({"type": "object", "properties": {
                    "name": {"type": "string"}, "model": {"type": "string"}},
                    "required": ["name", "model"], "additionalProperties": false}),
            ),
        };
        ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
        }
    }

    fn needs(&self, args: &Value) -> Vec<reef_core::Need> {
        let text = |name: &str| args.get(name).and_then(Value::as_str).map(str::to_owned);
        match self.kind {
            Kind::Broadcast => text("room")
                .map(reef_core::Need::Channel)
                .into_iter()
                .collect(),
            Kind::SpawnAgent => text("template")
                .map(reef_core::Need::Spawn)
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let (runtime, me) = self.ctx.me().await?;
        let raw = args.clone();
        match self.kind {
            Kind::MessageAgent => {
                let a: MessageArgs = parse(args)?;
                let key = self.ctx.next_key(ctx, "message_agent", &raw);
                let wait = a.expect_reply.then(|| {
                    a.timeout_secs
                        .unwrap_or(runtime.config().daemon.request_timeout_secs)
                });
                let sent = runtime
                    .send_message(&a.to, Sender::Agent(&me), &a.text, &key, wait)
                    .await
                    .map_err(failed)?;
                Ok(match (sent.duplicate, sent.request_id) {
                    (true, _) => format!(
                        "already sent to {} by an earlier attempt at this message; not sent again",
                        a.to
                    ),
                    (false, Some(id)) => format!(
                        "sent to {} as request {id}; the reply will arrive in your inbox",
                        a.to
                    ),
                    (false, None) => format!("sent to {}", a.to),
                })
            }
            Kind::Broadcast => {
                let a: BroadcastArgs = parse(args)?;
                let key = self.ctx.next_key(ctx, "broadcast", &raw);
                let n = runtime
                    .post_to_room(&a.room, Sender::Agent(&me), &a.text, &key)
                    .await
                    .map_err(failed)?;
                Ok(format!("posted to {} ({n} recipient(s))", a.room))
            }
            Kind::AskOperator => {
                let a: AskArgs = parse(args)?;
                let key = self.ctx.next_key(ctx, "ask_operator", &raw);
                // A reply owed for the message in hand waits for the operator's answer.
                let owed = lock(&self.ctx.current)
                    .as_ref()
                    .and_then(|c| c.request_id.clone());
                let item = runtime
                    .ask_operator(&me, &a.question, a.options, a.ttl_secs, &key, owed)
                    .await
                    .map_err(failed)?;
                if let Some(current) = lock(&self.ctx.current).as_mut() {
                    current.questions.push(item.id.clone());
                }
                Ok(format!(
                    "question {} is waiting for the operator; the answer will arrive in your \
                     inbox. Continue with other work or finish this turn.",
                    item.id
                ))
            }
            Kind::ListAgents => {
                let agents = runtime.list_agents().await.map_err(failed)?;
                let names: std::collections::HashMap<AgentId, String> = agents
                    .iter()
                    .map(|a| (a.id.clone(), a.name.clone()))
                    .collect();
                let mut out = String::new();
                for a in &agents {
                    let parent = a
                        .parent
                        .as_ref()
                        .and_then(|p| names.get(p))
                        .map_or("-", String::as_str);
                    let _ = writeln!(
                        out,
                        "{} template={} state={} parent={} model={}",
                        a.name,
                        a.template,
                        a.state,
                        parent,
                        a.model.as_deref().unwrap_or("default")
                    );
                }
                Ok(out)
            }
            Kind::SpawnAgent => {
                let a: SpawnArgs = parse(args)?;
                let spawned = runtime
                    .spawn_agent(
                        SpawnRequest {
                            name: a.name,
                            template: a.template,
                            model: a.model,
                            persona: a.persona,
                            task: a.task,
                            ephemeral: false,
                            budget: None,
                        },
                        Some(&me),
                    )
                    .await
                    .map_err(failed)?;
                let mut out = format!(
                    "spawned {} ({}), state {}",
                    spawned.agent.name, spawned.agent.template, spawned.agent.state
                );
                for why in spawned.clamped {
                    let _ = write!(out, "; narrowed to fit your own limits: {why}");
                }
                Ok(out)
            }
            Kind::StopAgent => {
                let a: NameArgs = parse(args)?;
                own_child(&runtime, &me, &a.name).await?;
                let agent = runtime
                    .stop_agent(&a.name, &format!("stopped by {}", me.name))
                    .await
                    .map_err(failed)?;
                Ok(format!("{} is {}", agent.name, agent.state))
            }
            Kind::SetAgentModel => {
                let a: ModelArgs = parse(args)?;
                own_child(&runtime, &me, &a.name).await?;
                let agent = runtime
                    .set_agent_model(&a.name, &a.model)
                    .await
                    .map_err(failed)?;
                Ok(format!(
                    "{} now uses {}",
                    agent.name,
                    agent.model.as_deref().unwrap_or("the default model")
                ))
            }
        }
    }
}

/// Managers act only on agents they spawned.
async fn own_child(runtime: &Runtime, me: &AgentRecord, name: &str) -> Result<(), ToolError> {
    let target = runtime.agent(name).await.map_err(failed)?;
    if target.parent.as_ref() == Some(&me.id) {
        Ok(())
    } else {
        Err(ToolError::Denied(format!(
            "`{name}` is not one of your child agents"
        )))
    }
}
