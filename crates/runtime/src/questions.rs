//! Operator questions and approvals: asked by agents, answered (or cancelled, or left to
//! expire) by the operator. The answer is delivered to the asker's inbox in the same
//! transaction that records it, which wakes the asker.

use crate::error::RuntimeError;
use crate::expiry::now_unix;
use crate::kernel::{Runtime, lock};
use reef_core::ToolContext;
use reef_store::{AgentRecord, NewPending, PendingItem, PendingKind, PendingStatus};
use serde_json::json;
use std::collections::HashSet;
use std::sync::Mutex;

/// The longest TTL a question may ask for (30 days).
pub const MAX_TTL_SECS: u64 = 30 * 86_400;

/// Approvals being carried out right now (so two concurrent approves run a command once).
#[derive(Default)]
pub(crate) struct InFlight(Mutex<HashSet<String>>);

impl InFlight {
    /// Whether the approval is being carried out (it must not expire or be cancelled now).
    pub(crate) fn contains(&self, id: &str) -> bool {
        lock(&self.0).contains(id)
    }
}

impl Runtime {
    /// Records a question for the operator and returns it at once; the answer arrives later
    /// in the asker's inbox.
    pub async fn ask_operator(
        &self,
        asker: &AgentRecord,
        question: &str,
        options: Vec<String>,
        ttl_secs: Option<u64>,
        key: &str,
        followup_request: Option<String>,
    ) -> Result<PendingItem, RuntimeError> {
        crate::messaging::check_text("question", question)?;
        if options.iter().any(|o| o.trim().is_empty()) {
            return Err(RuntimeError::invalid("options", "an option is empty"));
        }
        let ttl = ttl_secs.unwrap_or(self.inner.config.daemon.question_ttl_secs);
        if ttl == 0 || ttl > MAX_TTL_SECS {
            return Err(RuntimeError::invalid(
                "ttl_secs",
                format!("must be between 1 and {MAX_TTL_SECS}"),
            ));
        }
        let payload = json!({"question": question, "options": options, "agent": asker.name});
        self.ask(
            asker,
            PendingKind::Question,
            payload,
            ttl,
            key,
            followup_request,
        )
        .await
    }

    /// Records that `command` (for `tool` with `arguments`) waits for the operator.
    pub(crate) async fn request_approval(
        &self,
        asker: &AgentRecord,
        tool: &str,
        arguments: &serde_json::Value,
        command: &str,
        pattern: &str,
        key: &str,
    ) -> Result<PendingItem, RuntimeError> {
        let payload = json!({"tool": tool, "arguments": arguments, "command": command,
                             "pattern": pattern, "agent": asker.name});
        let ttl = self.inner.config.daemon.question_ttl_secs;
        self.ask(asker, PendingKind::Approval, payload, ttl, key, None)
            .await
    }

    /// A question or approval for the operator, idempotent per `key`: the same key returns
    /// the item recorded the first time.
    async fn ask(
        &self,
        asker: &AgentRecord,
        kind: PendingKind,
        payload: serde_json::Value,
        ttl_secs: u64,
        key: &str,
        followup_request: Option<String>,
    ) -> Result<PendingItem, RuntimeError> {
        let prefix = match kind {
            PendingKind::Approval => "ap",
            PendingKind::Question | PendingKind::Request | PendingKind::Breakpoint => "q",
        };
        let id = crate::messaging::pending_id(prefix, key, &asker.id);
        if let Ok(existing) = self.inner.store.get_pending(&id).await {
            return Ok(existing);
        }
        let ttl = i64::try_from(ttl_secs).unwrap_or(i64::MAX);
        let item = self
            .inner
            .store
            .create_pending(NewPending {
                id,
                kind,
                agent_id: Some(asker.id.clone()),
                target_id: None,
                payload,
                expires_at: Some(now_unix().saturating_add(ttl)),
                letter: None,
                followup_request,
            })
            .await?;
        self.inner.bus.poke();
        Ok(item)
    }

    /// Questions, approvals and requests; only pending ones unless `all`.
    pub async fn list_pending(&self, all: bool) -> Result<Vec<PendingItem>, RuntimeError> {
        let status = (!all).then_some(PendingStatus::Pending);
        Ok(self.inner.store.list_pending(status).await?)
    }

    pub async fn get_pending(&self, id: &str) -> Result<PendingItem, RuntimeError> {
        Ok(self.inner.store.get_pending(id).await?)
    }

    /// Answers a question. With options, the answer must be one of them (or its number).
    pub async fn answer(&self, id: &str, text: &str) -> Result<PendingItem, RuntimeError> {
        crate::messaging::check_text("answer", text)?;
        let item = self.inner.store.get_pending(id).await?;
        if item.kind == PendingKind::Breakpoint {
            // A debug command: step, continue, skip TEXT, edit JSON.
            self.answer_breakpoint(&item, text).await?;
            return Ok(self.inner.store.get_pending(&item.id).await?);
        }
        if item.kind != PendingKind::Question {
            return Err(RuntimeError::invalid(
                "id",
                format!(
                    "{} is {} {}; answer questions, approve or deny approvals",
                    item.id,
                    article(item.kind),
                    item.kind.as_str()
                ),
            ));
        }
        let options: Vec<String> = item
            .payload
            .get("options")
            .and_then(|o| serde_json::from_value(o.clone()).ok())
            .unwrap_or_default();
        let answer = if options.is_empty() {
            text.to_owned()
        } else if let Some(hit) = options.iter().find(|o| o.eq_ignore_ascii_case(text.trim())) {
            hit.clone()
        } else if let Some(hit) = text
            .trim()
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| options.get(i))
        {
            hit.clone()
        } else {
            return Err(RuntimeError::invalid(
                "answer",
                format!("{text:?} is not one of the options: {}", options.join(", ")),
            ));
        };
        self.resolve(&item.id, PendingStatus::Answered, Some(answer))
            .await
    }

    /// Approves a pending command: it runs now, in the asker's sandbox, and the asker gets
    /// the approval with the command's output.
    pub async fn approve(&self, id: &str) -> Result<PendingItem, RuntimeError> {
        let item = self.approval(id).await?;
        let _guard = InFlightGuard::take(&self.inner.in_flight, &item.id)?;
        let Some(agent_id) = &item.agent_id else {
            return Err(RuntimeError::NotFound(format!(
                "the agent of {} is gone",
                item.id
            )));
        };
        let agent = self.agent(agent_id.as_str()).await?;
        let tool_name = item
            .payload
            .get("tool")
            .and_then(|t| t.as_str())
            .unwrap_or("shell")
            .to_owned();
        let arguments = item.payload.get("arguments").cloned().unwrap_or(json!({}));
        let registry = crate::worker::registry_for(self, &agent, None)?;
        // The agent's token as it is now: a revocation since the request stops the command.
        let refused = match registry.get(&tool_name) {
            Some(tool) => self
                .rights_for(&agent, &tool_name, tool.as_ref(), &arguments)
                .await
                .err(),
            None => None,
        };
        let output = match (refused, registry.get(&tool_name)) {
            (Some(refusal), _) => format!("the command did not run: {refusal}"),
            (None, Some(tool)) => {
                let ctx = ToolContext {
                    workspace: agent.workspace.clone().into(),
                    session_id: agent.session.clone().unwrap_or_default(),
                    call_id: reef_core::ToolCallId::new(),
                    read_only: crate::worker::skill_folders(self, &agent),
                };
                registry
                    .attach_secrets(self.inner.store.clone(), &agent.name)
                    .await?;
                // The operator approved this command with the secrets it names.
                let named: Vec<String> = arguments
                    .get("secrets")
                    .and_then(|s| s.as_array())
                    .map(|a| {
                        a.iter()
                            .filter_map(|n| n.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                registry.secrets().approve(&named);
                match tool.call(&ctx, arguments).await {
                    Ok(text) => registry.redact(&text),
                    Err(err) => {
                        format!("the command failed: {}", registry.redact(&err.to_string()))
                    }
                }
            }
            (None, None) => format!("tool `{tool_name}` is no longer available to this agent"),
        };
        self.resolve(
            &item.id,
            PendingStatus::Answered,
            Some(format!("approved; the command ran. Its output:\n{output}")),
        )
        .await
    }

    /// Whether `agent`'s token allows calling `tool` with `arguments` now; a refusal is
    /// recorded as `cap.denied`.
    async fn rights_for(
        &self,
        agent: &reef_store::AgentRecord,
        name: &str,
        tool: &dyn reef_core::Tool,
        arguments: &serde_json::Value,
    ) -> Result<(), String> {
        let mut needs = vec![reef_core::Need::Tool(name.to_owned())];
        needs.extend(tool.needs(arguments));
        let rights = reef_agent::Rights::new(reef_agent::TokenSource::Stored);
        match rights.decide(&self.inner.store, &agent.name, &needs).await {
            Ok(()) => Ok(()),
            Err(refusal) => {
                let mut data = json!({"tool": name, "reason": refusal.reason, "at_approval": true});
                if let (Some(obj), Some(detail)) =
                    (data.as_object_mut(), refusal.detail.as_object())
                {
                    obj.extend(detail.clone());
                }
                self.audit_denial(agent, data).await;
                Err(refusal.reason)
            }
        }
    }

    /// Denies a pending command; the asker is told it did not run.
    pub async fn deny(&self, id: &str, reason: Option<&str>) -> Result<PendingItem, RuntimeError> {
        let item = self.approval(id).await?;
        let _guard = InFlightGuard::take(&self.inner.in_flight, &item.id)?;
        let answer = match reason {
            Some(r) if !r.trim().is_empty() => format!("denied: {r}; the command did not run"),
            _ => "denied; the command did not run".to_owned(),
        };
        self.resolve(&item.id, PendingStatus::Answered, Some(answer))
            .await
    }

    /// Withdraws a question, approval or request; whoever waits is told.
    pub async fn cancel(&self, id: &str) -> Result<PendingItem, RuntimeError> {
        let item = self.inner.store.get_pending(id).await?;
        if item.kind == PendingKind::Breakpoint {
            // Withdrawing a stop lets the turn go on.
            self.answer_breakpoint(&item, "continue").await?;
            return Ok(self.inner.store.get_pending(&item.id).await?);
        }
        if self.inner.in_flight.contains(&item.id) {
            return Err(RuntimeError::Conflict(format!(
                "approval {} is running right now; it can no longer be cancelled",
                item.id
            )));
        }
        self.resolve(&item.id, PendingStatus::Cancelled, None).await
    }

    pub(crate) async fn resolve(
        &self,
        id: &str,
        status: PendingStatus,
        answer: Option<String>,
    ) -> Result<PendingItem, RuntimeError> {
        let item = self
            .inner
            .store
            .resolve_pending(id, status, answer, None)
            .await?;
        if let Some(agent) = &item.agent_id {
            self.wake(agent);
        }
        self.inner.bus.poke();
        Ok(item)
    }

    async fn approval(&self, id: &str) -> Result<PendingItem, RuntimeError> {
        let item = self.inner.store.get_pending(id).await?;
        if item.kind != PendingKind::Approval {
            return Err(RuntimeError::invalid(
                "id",
                format!(
                    "{} is {} {}, not an approval",
                    item.id,
                    article(item.kind),
                    item.kind.as_str()
                ),
            ));
        }
        if item.status != PendingStatus::Pending {
            return Err(RuntimeError::Conflict(format!(
                "approval {} is already {}",
                item.id,
                item.status.as_str()
            )));
        }
        Ok(item)
    }
}

fn article(kind: PendingKind) -> &'static str {
    match kind {
        PendingKind::Approval => "an",
        PendingKind::Question | PendingKind::Request | PendingKind::Breakpoint => "a",
    }
}

struct InFlightGuard<'a> {
    set: &'a InFlight,
    id: String,
}

impl<'a> InFlightGuard<'a> {
    fn take(set: &'a InFlight, id: &str) -> Result<InFlightGuard<'a>, RuntimeError> {
        if !lock(&set.0).insert(id.to_owned()) {
            return Err(RuntimeError::Conflict(format!(
                "approval {id} is being decided right now"
            )));
        }
        Ok(InFlightGuard {
            set,
            id: id.to_owned(),
        })
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        lock(&self.set.0).remove(&self.id);
    }
}
