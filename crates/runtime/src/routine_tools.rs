//! The routine tools of agents with the `schedule` capability: `schedule_routine`,
//! `list_routines` and `cancel_routine`. An agent's routines are its own: their names start
//! with its name, they message only it or its children, a spawned run is its child (clamped to
//! its capabilities and budget), they fire only while it runs, and they are deleted with it.

use crate::kernel::Runtime;
use crate::routines::RoutineRequest;
use crate::tools::AgentCtx;
use async_trait::async_trait;
use reef_config::RoutineFields;
use reef_core::{Action, Tool, ToolContext, ToolError, ToolSpec};
use reef_store::{AgentRecord, RoutineSource};
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::sync::Arc;

/// The routine tools, by public name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RoutineKind {
    Schedule,
    List,
    Cancel,
}

impl RoutineKind {
    pub const ALL: [RoutineKind; 3] = [
        RoutineKind::Schedule,
        RoutineKind::List,
        RoutineKind::Cancel,
    ];
}

pub(crate) struct RoutineTool {
    pub kind: RoutineKind,
    pub ctx: Arc<AgentCtx>,
}

#[derive(Deserialize)]
struct ScheduleArgs {
    name: String,
    #[serde(flatten)]
    fields: RoutineFields,
    #[serde(flatten)]
    unknown: std::collections::BTreeMap<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelArgs {
    name: String,
}

/// The tool error that says what the model can do about a runtime error.
fn failed(err: crate::error::RuntimeError) -> ToolError {
    use crate::error::RuntimeError as E;
    match err {
        E::Invalid { .. } | E::NotFound(_) => ToolError::InvalidArguments(err.to_string()),
        E::Denied(why) => ToolError::Denied(why),
        other => ToolError::Failed(other.to_string()),
    }
}

/// An agent's routine names start with its own name.
fn owned_name(me: &AgentRecord, name: &str) -> String {
    if name.starts_with(&format!("{}-", me.name)) {
        name.to_owned()
    } else {
        format!("{}-{name}", me.name)
    }
}

#[async_trait]
impl Tool for RoutineTool {
    fn spec(&self) -> ToolSpec {
        let (name, description, parameters) = match self.kind {
            RoutineKind::Schedule => (
                "schedule_routine",
                "Schedule recurring work for yourself or your child agents: one trigger (cron \
                 with tz, every, event with match, or manual) and one action (agent + message, \
                 or template + task + timeout for a new child agent per run). Each fire \
                 happens once; a message names the routine and the scheduled instant.",
                json!({"type": "object", "properties": {
                    "name": {"type": "string", "description": "a-z 0-9 - _; your name is put in front"},
                    "cron": {"type": "string", "description": "e.g. \"0 9 * * MON-FRI\""},
                    "tz": {"type": "string", "description": "IANA zone of cron, e.g. Europe/Berlin"},
                    "every": {"type": "string", "description": "an interval, e.g. \"30m\""},
                    "event": {"type": "string", "description": "an event kind, e.g. agent.state_changed"},
                    "match": {"type": "string", "description": "a regex over the event's text"},
                    "agent": {"type": "string", "description": "you or one of your child agents"},
                    "message": {"type": "string"},
                    "template": {"type": "string"},
                    "task": {"type": "string"},
                    "timeout": {"type": "string", "description": "e.g. \"10m\""},
                    "concurrency": {"type": "string", "enum": ["skip", "queue", "replace"]},
                    "catch_up": {"type": "string", "enum": ["skip", "once", "all"]}},
                    "required": ["name"], "additionalProperties": false}),
            ),
            RoutineKind::List => (
                "list_routines",
                "List your routines: trigger, action, state and next fire.",
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ),
            RoutineKind::Cancel => (
                "cancel_routine",
                "Delete one of your routines.",
                json!({"type": "object", "properties": {"name": {"type": "string"}},
                       "required": ["name"], "additionalProperties": false}),
            ),
        };
        ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
        }
    }

    fn needs(&self, _args: &Value) -> Vec<reef_core::Need> {
        vec![reef_core::Need::Schedule]
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let (runtime, me) = self.ctx.me().await?;
        match self.kind {
            RoutineKind::Schedule => schedule(&runtime, &me, args).await,
            RoutineKind::List => {
                let mut out = String::new();
                for view in runtime.list_routines().await.map_err(failed)? {
                    if view.record.owner.as_ref() != Some(&me.id)
                        || view.record.source != RoutineSource::Agent
                    {
                        continue;
                    }
                    let r = &view.record;
                    let _ = writeln!(
                        out,
                        "{} enabled={} trigger={} next={} failures={}",
                        r.name,
                        r.enabled,
                        serde_json::to_string(&r.spec.trigger).unwrap_or_default(),
                        view.next.as_deref().unwrap_or("-"),
                        r.failures
                    );
                }
                Ok(if out.is_empty() {
                    "you have no routines".into()
                } else {
                    out
                })
            }
            RoutineKind::Cancel => {
                let a: CancelArgs = serde_json::from_value(args)
                    .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
                let name = owned_name(&me, &a.name);
                let view = runtime.routine(&name).await.map_err(failed)?;
                if view.record.owner.as_ref() != Some(&me.id) {
                    return Err(ToolError::Denied(format!(
                        "`{name}` is not one of your routines"
                    )));
                }
                runtime.delete_routine(&name).await.map_err(failed)?;
                Ok(format!("deleted routine {name}"))
            }
        }
    }
}

async fn schedule(runtime: &Runtime, me: &AgentRecord, args: Value) -> Result<String, ToolError> {
    let a: ScheduleArgs =
        serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
    if let Some(key) = a.unknown.keys().next() {
        return Err(ToolError::InvalidArguments(format!(
            "`{key}` is not a routine key"
        )));
    }
    if a.fields.webhook.is_some() {
        return Err(ToolError::Denied(
            "webhook routines are the operator's to configure".into(),
        ));
    }
    let (spec, enabled) = reef_config::routine_spec(a.fields, &runtime.config().scheduler)
        .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
    if let Action::Message { agent, .. } = &spec.action {
        let target = runtime.agent(agent).await.map_err(failed)?;
        if target.id != me.id && target.parent.as_ref() != Some(&me.id) {
            return Err(ToolError::Denied(format!(
                "a routine of yours may message you or your child agents, not `{agent}`"
            )));
        }
    }
    if matches!(spec.action, Action::Spawn { .. }) && !me.capabilities.spawn {
        return Err(ToolError::Denied(
            "you may not spawn agents, so your routines may not either".into(),
        ));
    }
    let name = owned_name(me, &a.name);
    let record = runtime
        .create_routine(
            RoutineRequest {
                name: name.clone(),
                spec,
                enabled,
            },
            Some(&me.id),
        )
        .await
        .map_err(failed)?;
    let next = runtime
        .routine(&record.name)
        .await
        .ok()
        .and_then(|v| v.next)
        .unwrap_or_else(|| "when triggered".into());
    Ok(format!("scheduled routine {name}; next fire {next}"))
}
