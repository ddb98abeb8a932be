//! Running an operator command against the runtime: every front end hands a line and the
//! operator's identity to [`Runtime::operate`] and shows the [`Reply`]'s lines as they are.

use super::spec::shown;
use super::{COMMANDS, Command, CommandSpec};
use crate::agents::SpawnRequest;
use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_store::{AgentRecord, PendingItem, PendingKind, StoredEvent};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The template `invoke` uses when none is named.
pub const DEFAULT_TEMPLATE: &str = "worker";
/// The longest line of a reply, in characters (longer values are cut with `…`).
const LINE_CHARS: usize = 300;

/// What a command answered: one or more lines, and whether it did what was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub ok: bool,
    pub lines: Vec<String>,
}

impl Reply {
    fn done(lines: Vec<String>) -> Reply {
        Reply { ok: true, lines }
    }

    fn line(line: impl Into<String>) -> Reply {
        Reply::done(vec![line.into()])
    }

    fn failed(line: impl Into<String>) -> Reply {
        Reply {
            ok: false,
            lines: vec![line.into()],
        }
    }
}

impl Runtime {
    /// Parses and runs one operator command line (without a front end's `!`) for
    /// `operator` (who, as the front end identifies them; recorded in the event). A line
    /// that is not a command gets its usage back; a command that fails gets one line saying
    /// why.
    pub async fn operate(&self, line: &str, operator: &str) -> Reply {
        let command = match Command::parse(line, |w| self.templates().get(w).is_some()) {
            Ok(command) => command,
            Err(err) => return Reply::failed(err.to_string()),
        };
        let name = command_name(&command);
        let reply = match self.run_command(command, operator).await {
            Ok(reply) => reply,
            Err(err) => Reply::failed(format!("{name}: {err}")),
        };
        let data = json!({"by": operator, "command": name, "ok": reply.ok});
        if let Err(err) = self.record_event("operator.command", None, data).await {
            tracing::warn!(error = %err, "cannot record an operator command");
        }
        reply
    }

    async fn run_command(&self, command: Command, operator: &str) -> Result<Reply, RuntimeError> {
        Ok(match command {
            Command::Invoke {
                name,
                template,
                task,
            } => {
                let template = template.unwrap_or_else(|| DEFAULT_TEMPLATE.to_owned());
                let has_task = task.is_some();
                let spawned = self
                    .spawn_agent(
                        SpawnRequest {
                            name,
                            template: template.clone(),
                            task,
                            ..SpawnRequest::default()
                        },
                        None,
                    )
                    .await?;
                let mut line = format!(
                    "{} is {} (template {template}{})",
                    spawned.agent.name,
                    spawned.agent.state,
                    if has_task { ", task queued" } else { "" }
                );
                if !spawned.clamped.is_empty() {
                    line.push_str(&format!("; narrowed: {}", spawned.clamped.join(", ")));
                }
                Reply::line(line)
            }
            Command::Destroy { name, purge } => {
                self.destroy_agent(&name, purge).await?;
                Reply::line(if purge {
                    format!("{name} is destroyed and its workspace deleted")
                } else {
                    format!("{name} is destroyed")
                })
            }
            Command::List => Reply::done(list(&self.list_agents().await?)),
            Command::Status { name: None } => Reply::done(self.status_lines().await?),
            Command::Status { name: Some(name) } => Reply::done(self.agent_status(&name).await?),
            Command::Logs { name, lines } => {
                let agent = self.get_agent(&name).await?;
                let events = self.store().events_tail(Some(&agent.id), lines).await?;
                if events.is_empty() {
                    Reply::line(format!("{name} has no events"))
                } else {
                    Reply::done(events.iter().map(event_line).collect())
                }
            }
            Command::Model { name, provider } => {
                let agent = self.set_agent_model(&name, &provider).await?;
                Reply::line(format!(
                    "{} now uses {}",
                    agent.name,
                    agent.model.as_deref().unwrap_or(&provider)
                ))
            }
            Command::Models => Reply::done(self.model_lines()),
            Command::Templates => Reply::done(
                self.templates()
                    .iter()
                    .map(|t| cut(&format!("{}: {}", t.name, t.description)))
                    .collect(),
            ),
            Command::Persona { name, text } => {
                let agent = self.set_agent_persona(&name, &text).await?;
                Reply::line(format!("{} has a new persona", agent.name))
            }
            Command::Pause { name } => {
                let agent = self
                    .pause_agent(&name, &format!("paused by {operator}"))
                    .await?;
                Reply::line(format!("{} is {}", agent.name, agent.state))
            }
            Command::Resume { name } => {
                let agent = self
                    .resume_agent(&name, &format!("resumed by {operator}"))
                    .await?;
                Reply::line(format!("{} is {}", agent.name, agent.state))
            }
            Command::Questions => {
                let items = self.list_pending(false).await?;
                if items.is_empty() {
                    Reply::line("nothing is waiting for an answer")
                } else {
                    Reply::done(items.iter().map(pending_line).collect())
                }
            }
            Command::Answer { id, text } => {
                let item = self.answer(&id, &text).await?;
                Reply::line(format!("{} is answered", item.id))
            }
            Command::Approve { id } => {
                let item = self.approve(&id).await?;
                Reply::line(format!("{} is approved", item.id))
            }
            Command::Deny { id, reason } => {
                let item = self.deny(&id, reason.as_deref()).await?;
                Reply::line(format!("{} is denied", item.id))
            }
            Command::Help { command: None } => Reply::done(
                std::iter::once(
                    "commands (prefix each with the front end's marker, `!` on IRC):".to_owned(),
                )
                .chain(COMMANDS.iter().map(help_line))
                .collect(),
            ),
            Command::Help {
                command: Some(name),
            } => match CommandSpec::find(&name) {
                Some(spec) => Reply::line(help_line(spec)),
                None => Reply::failed(format!(
                    "help: no command `{}`; `help` lists them",
                    shown(&name)
                )),
            },
        })
    }

    async fn agent_status(&self, name: &str) -> Result<Vec<String>, RuntimeError> {
        let agent = self.get_agent(name).await?;
        let (usage, cost) = self.store().agent_usage(&agent.id).await?;
        let waiting = self
            .store()
            .inbox(&agent.id, reef_store::InboxStatus::Pending)
            .await?
            .len();
        Ok(vec![
            format!(
                "{}: {} · template {} · model {} · {waiting} waiting",
                agent.name,
                agent.state,
                agent.template,
                self.model_name(&agent)
            ),
            format!(
                "{} tokens in, {} out · {} · since {}",
                usage.input_tokens,
                usage.output_tokens,
                dollars(cost),
                agent.created_at
            ),
        ])
    }

    fn model_lines(&self) -> Vec<String> {
        let config = self.config();
        let default = config.default_provider.as_deref();
        if config.providers.is_empty() {
            return vec!["no providers are configured".to_owned()];
        }
        config
            .providers
            .values()
            .map(|p| {
                format!(
                    "{}: {} ({}){}",
                    p.name,
                    p.model,
                    p.wire_api,
                    if Some(p.name.as_str()) == default {
                        " · default"
                    } else {
                        ""
                    }
                )
            })
            .collect()
    }

    /// The provider an agent runs on, by name.
    pub(crate) fn model_name(&self, agent: &AgentRecord) -> String {
        agent
            .model
            .clone()
            .or_else(|| self.templates().get(&agent.template)?.model.clone())
            .or_else(|| self.config().default_provider.clone())
            .unwrap_or_else(|| "default".to_owned())
    }
}

/// `list`: one line per state, the agents in it by name, so a hundred agents stay a few lines.
fn list(agents: &[AgentRecord]) -> Vec<String> {
    if agents.is_empty() {
        return vec!["no agents; `invoke NAME [TEMPLATE] [task…]` starts one".to_owned()];
    }
    let mut by_state: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for agent in agents {
        by_state
            .entry(agent.state.to_string())
            .or_default()
            .push(&agent.name);
    }
    let mut lines = vec![format!("{} agents", agents.len())];
    for (state, names) in by_state {
        lines.push(format!("{state} ({}): {}", names.len(), names.join(" ")));
    }
    lines
}

/// Counts per state, in a stable order: `3 running, 1 paused`.
pub(crate) fn state_counts(agents: &[AgentRecord]) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for agent in agents {
        *counts.entry(agent.state.to_string()).or_default() += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

fn help_line(spec: &CommandSpec) -> String {
    format!("{} — {}", spec.usage(), spec.summary)
}

fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Invoke { .. } => "invoke",
        Command::Destroy { .. } => "destroy",
        Command::List => "list",
        Command::Status { .. } => "status",
        Command::Logs { .. } => "logs",
        Command::Model { .. } => "model",
        Command::Models => "models",
        Command::Templates => "templates",
        Command::Persona { .. } => "persona",
        Command::Pause { .. } => "pause",
        Command::Resume { .. } => "resume",
        Command::Questions => "questions",
        Command::Answer { .. } => "answer",
        Command::Approve { .. } => "approve",
        Command::Deny { .. } => "deny",
        Command::Help { .. } => "help",
    }
}

/// One event as a line: its time, kind and the fields that say the most.
fn event_line(event: &StoredEvent) -> String {
    let time = event.created_at.get(11..19).unwrap_or(&event.created_at);
    let detail = match event.kind.as_str() {
        "turn.ended" => match &event.data["outcome"] {
            Value::Object(o) => o
                .get("text")
                .and_then(Value::as_str)
                .map(|t| format!("completed: {t}"))
                .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
            other => other.to_string(),
        },
        "tool.call" => format!(
            "{} {}",
            event.data["name"].as_str().unwrap_or_default(),
            event.data["arguments"]
        ),
        "tool.result" => format!(
            "{}{}: {}",
            event.data["name"].as_str().unwrap_or_default(),
            if event.data["is_error"] == true {
                " (error)"
            } else {
                ""
            },
            event.data["output"].as_str().unwrap_or_default()
        ),
        "agent.state_changed" => format!(
            "{} → {} {}",
            event.data["from"].as_str().unwrap_or_default(),
            event.data["to"].as_str().unwrap_or_default(),
            event.data["reason"].as_str().unwrap_or_default()
        ),
        _ => event.data.to_string(),
    };
    cut(&format!("{time} {} {detail}", event.kind))
}

fn pending_line(item: &PendingItem) -> String {
    let p = &item.payload;
    let who = p["agent"].as_str().or(p["from"].as_str()).unwrap_or("?");
    let what = p["question"]
        .as_str()
        .or(p["command"].as_str())
        .or(p["text"].as_str())
        .unwrap_or_default();
    let kind = match item.kind {
        PendingKind::Question => "question",
        PendingKind::Approval => "approval",
        PendingKind::Request => "request",
        PendingKind::Breakpoint => "breakpoint",
    };
    cut(&format!("{} {kind} from {who}: {what}", item.id))
}

pub(crate) fn dollars(micros: u64) -> String {
    format!("${}.{:04}", micros / 1_000_000, (micros % 1_000_000) / 100)
}

/// One line, at most [`LINE_CHARS`] characters.
fn cut(text: &str) -> String {
    let one_line = text.replace(['\r', '\n'], " ");
    if one_line.chars().count() <= LINE_CHARS {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(LINE_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_show_four_decimals() {
        assert_eq!(dollars(0), "$0.0000");
        assert_eq!(dollars(1_234_567), "$1.2345");
    }

    #[test]
    fn long_lines_are_cut_to_one() {
        let long = "x\n".repeat(400);
        let line = cut(&long);
        assert_eq!(line.chars().count(), LINE_CHARS);
        assert!(!line.contains('\n'));
        assert!(line.ends_with('…'));
    }

    #[test]
    fn a_state_count_is_stable() {
        assert_eq!(state_counts(&[]), "none");
    }
}
