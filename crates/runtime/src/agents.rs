//! Agent lifecycle operations: spawn from a template (a child never wider than its parent),
//! pause, resume, stop, destroy, and changing the model or persona of a live agent.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_core::{AgentId, AgentState, Budget};
use reef_store::{AgentRecord, NewAgent, PendingStatus};
use serde::Serialize;

/// What to spawn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpawnRequest {
    pub name: String,
    pub template: String,
    /// Provider name; `None` takes the template's, then the default provider.
    pub model: Option<String>,
    /// Replaces the template's persona.
    pub persona: Option<String>,
    /// A first message for the new agent's inbox.
    pub task: Option<String>,
    /// Destroy the agent once its inbox is done (a webhook's or a request's agent).
    pub ephemeral: bool,
    /// Limits narrower than the template's (a routine run's budget); `None` keeps them.
    pub budget: Option<Budget>,
}

/// What `spawn` did; `clamped` lists what was narrowed to fit inside the parent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spawned {
    pub agent: AgentRecord,
    pub clamped: Vec<String>,
}

/// Room every agent joins.
pub const ROOM_AGENTS: &str = "#agents";
/// Room for operator commands; agents that may spawn join it.
pub const ROOM_CONTROL: &str = "#control";

impl Runtime {
    /// Creates an agent from a template and starts it. With a `parent`, the parent must hold
    /// the spawn capability, and the child's capabilities and budget are clamped to the
    /// parent's. Spawning the same name again for the same parent returns the existing
    /// agent (a retried tool call after a restart does not fail).
    pub async fn spawn_agent(
        &self,
        req: SpawnRequest,
        parent: Option<&AgentRecord>,
    ) -> Result<Spawned, RuntimeError> {
        check_name(&req.name)?;
        let template = self.inner.templates.get(&req.template).ok_or_else(|| {
            RuntimeError::invalid(
                "template",
                format!(
                    "no template named `{}`; available: {}",
                    req.template,
                    self.inner.templates.names().join(", ")
                ),
            )
        })?;
        let model = req.model.clone().or_else(|| template.model.clone());
        if let Some(model) = &model {
            self.check_model(model)?;
        }
        if let Some(existing) = self.inner.store.agent_by_name(&req.name).await? {
            if let Some(parent) = parent
                && existing.parent.as_ref() == Some(&parent.id)
                && existing.template == req.template
            {
                return Ok(Spawned {
                    agent: existing,
                    clamped: Vec::new(),
                });
            }
            return Err(RuntimeError::Conflict(format!(
                "an agent named `{}` already exists; choose another name or destroy it first",
                req.name
            )));
        }
        let mut capabilities = template.capabilities.clone();
        let mut budget = match &req.budget {
            Some(limit) => template.budget.clamped_to(limit),
            None => template.budget.clone(),
        };
        let mut clamped = Vec::new();
        if let Some(parent) = parent {
            if let Some(why) = self.spawn_refused(parent, &req.template).await? {
                let data = serde_json::json!({"right": "spawn", "template": req.template,
                                              "name": req.name, "reason": why});
                self.audit_denial(parent, data).await;
                return Err(RuntimeError::Denied(why));
            }
            if let Err(why) = capabilities.within(&parent.capabilities) {
                clamped.push(why);
                capabilities = capabilities.clamped_to(&parent.capabilities);
            }
            if let Err(why) = budget.within(&parent.budget) {
                clamped.push(why);
                budget = budget.clamped_to(&parent.budget);
            }
        }
        let workspace = self.agent_dir(&req.name).join("workspace");
        std::fs::create_dir_all(&workspace).map_err(|e| {
            RuntimeError::Setup(format!("cannot create {}: {e}", workspace.display()))
        })?;
        let store = &self.inner.store;
        let agent = store
            .create_agent(NewAgent {
                id: AgentId::new(),
                name: req.name.clone(),
                template: template.name.clone(),
                persona: req
                    .persona
                    .clone()
                    .unwrap_or_else(|| template.persona.clone()),
                model,
                workspace: workspace.display().to_string(),
                capabilities,
                budget,
                parent: parent.map(|p| p.id.clone()),
                ephemeral: req.ephemeral,
            })
            .await?;
        // Its token exists from birth: a child's is its parent's narrowed by one block.
        crate::caps::ensure_token(store, &agent).await?;
        store.join_room(ROOM_AGENTS, &agent.id).await?;
        if agent.capabilities.spawn {
            store.join_room(ROOM_CONTROL, &agent.id).await?;
        }
        let agent = store
            .transition_agent(&agent.id, AgentState::Running, "spawned")
            .await?;
        self.ensure_heartbeat(&agent).await?;
        if let Some(task) = &req.task {
            let sender = parent.map_or("operator", |p| p.name.as_str());
            store
                .deliver(&agent.id, sender, task, &format!("task:{}", agent.id))
                .await?;
            self.wake(&agent.id);
        }
        self.inner.bus.poke();
        Ok(Spawned { agent, clamped })
    }

    /// Why `parent` may not spawn from `template`, if it may not: its template lacks the spawn
    /// right, or its token (as it is now, minted first if it has none) does not grant that
    /// template. A routine's spawn comes here without a tool call, so the token is checked here.
    async fn spawn_refused(
        &self,
        parent: &AgentRecord,
        template: &str,
    ) -> Result<Option<String>, RuntimeError> {
        if !parent.capabilities.spawn {
            return Ok(Some(format!(
                "agent `{}` may not spawn agents (its template does not grant spawn)",
                parent.name
            )));
        }
        crate::caps::ensure_token(&self.inner.store, parent).await?;
        let need = [reef_core::Need::Spawn(template.to_owned())];
        let rights = reef_agent::Rights::new(reef_agent::TokenSource::Stored);
        Ok(rights
            .decide(&self.inner.store, &parent.name, &need)
            .await
            .err()
            .map(|refusal| refusal.reason))
    }

    /// Every agent, oldest first.
    pub async fn list_agents(&self) -> Result<Vec<AgentRecord>, RuntimeError> {
        Ok(self.inner.store.list_agents().await?)
    }

    /// One agent by name (or id).
    pub async fn get_agent(&self, name: &str) -> Result<AgentRecord, RuntimeError> {
        self.agent(name).await
    }

    /// What confines the agent's commands (`worker::policy_summary`): its template's
    /// `[sandbox]`, its domains narrowed by its capabilities, on the daemon's backend.
    pub fn agent_sandbox(&self, record: &AgentRecord) -> serde_json::Value {
        crate::worker::policy_summary(crate::worker::agent_sandbox(self, record).policy())
    }

    /// No new turns until resumed; a turn in progress finishes.
    pub async fn pause_agent(&self, name: &str, reason: &str) -> Result<AgentRecord, RuntimeError> {
        self.set_state(name, AgentState::Paused, reason).await
    }

    /// Runs turns again, starting with whatever waited in the inbox.
    pub async fn resume_agent(
        &self,
        name: &str,
        reason: &str,
    ) -> Result<AgentRecord, RuntimeError> {
        let agent = self.set_state(name, AgentState::Running, reason).await?;
        self.wake(&agent.id);
        Ok(agent)
    }

    /// Terminates the agent: a turn in progress is interrupted, its inbox is kept.
    pub async fn stop_agent(&self, name: &str, reason: &str) -> Result<AgentRecord, RuntimeError> {
        let agent = self.set_state(name, AgentState::Terminated, reason).await?;
        self.stop_worker(&agent.id).await;
        Ok(agent)
    }

    /// Removes the agent and its inbox; `purge` also deletes its transcript and its
    /// directory under `$REEF_HOME/agents`.
    pub async fn destroy_agent(&self, name: &str, purge: bool) -> Result<(), RuntimeError> {
        let agent = self.agent(name).await?;
        if !agent.state.is_final() {
            // Not running any more before the worker stops, so a concurrent wake starts
            // nothing for an agent about to disappear.
            self.inner
                .store
                .transition_agent(&agent.id, AgentState::Terminated, "destroyed")
                .await?;
        }
        self.stop_worker(&agent.id).await;
        self.inner.debuggers.remove(&agent.id);
        // Whoever waits for a reply from this agent is told not to.
        for item in self
            .inner
            .store
            .list_pending(Some(PendingStatus::Pending))
            .await?
        {
            if item.target_id.as_ref() == Some(&agent.id) {
                match self.resolve(&item.id, PendingStatus::Cancelled, None).await {
                    Ok(_) | Err(RuntimeError::Conflict(_)) => {}
                    Err(err) => return Err(err),
                }
            }
        }
        let owned = self.inner.store.routines_owned_by(&agent.id).await?;
        self.inner.store.delete_agent(&agent.id, purge).await?;
        // Its routines (heartbeat, the ones it scheduled) went with it.
        for routine in owned {
            self.inner.scheduler.changed_routine(&routine);
        }
        if purge {
            let dir = self.agent_dir(&agent.name);
            if let Err(e) = std::fs::remove_dir_all(&dir)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                return Err(RuntimeError::Setup(format!(
                    "the agent was destroyed but {} could not be removed: {e}",
                    dir.display()
                )));
            }
        }
        self.inner.bus.poke();
        Ok(())
    }

    /// Switches the agent's model (a configured provider name) from its next turn on.
    pub async fn set_agent_model(
        &self,
        name: &str,
        model: &str,
    ) -> Result<AgentRecord, RuntimeError> {
        self.check_model(model)?;
        let agent = self.agent(name).await?;
        let agent = self
            .inner
            .store
            .update_agent(&agent.id, Some(Some(model.to_owned())), None)
            .await?;
        self.refresh(&agent.id);
        self.inner.bus.poke();
        Ok(agent)
    }

    /// Compacts the agent's session now (after its running turn, if any), with the
    /// configured strategy. Answers with the compaction; `Conflict` when there is nothing
    /// to compact.
    pub async fn compact_agent(&self, name: &str) -> Result<reef_core::EventMsg, RuntimeError> {
        let agent = self.agent(name).await?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.control(&agent.id, crate::worker::Control::Compact(tx))?;
        rx.await.map_err(|_| RuntimeError::ShuttingDown)?
    }

    /// Gives the agent a fresh session (after its running turn, if any): a new transcript
    /// from the next message on; its notes, workspace and long-term memory stay.
    pub async fn reset_agent(&self, name: &str) -> Result<reef_core::SessionId, RuntimeError> {
        let agent = self.agent(name).await?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.control(&agent.id, crate::worker::Control::Reset(tx))?;
        let session = rx.await.map_err(|_| RuntimeError::ShuttingDown)??;
        self.inner.bus.poke();
        Ok(session)
    }

    /// Replaces the agent's persona from its next turn on.
    pub async fn set_agent_persona(
        &self,
        name: &str,
        persona: &str,
    ) -> Result<AgentRecord, RuntimeError> {
        if persona.trim().is_empty() {
            return Err(RuntimeError::invalid("persona", "must not be empty"));
        }
        let agent = self.agent(name).await?;
        let agent = self
            .inner
            .store
            .update_agent(&agent.id, None, Some(persona.to_owned()))
            .await?;
        self.refresh(&agent.id);
        self.inner.bus.poke();
        Ok(agent)
    }

    async fn set_state(
        &self,
        name: &str,
        to: AgentState,
        reason: &str,
    ) -> Result<AgentRecord, RuntimeError> {
        let agent = self.agent(name).await?;
        let agent = self
            .inner
            .store
            .transition_agent(&agent.id, to, reason)
            .await?;
        self.inner.bus.poke();
        Ok(agent)
    }

    /// A model name must be a configured provider.
    pub(crate) fn check_model(&self, model: &str) -> Result<(), RuntimeError> {
        if self.inner.model_override.is_some() || self.inner.config.providers.contains_key(model) {
            return Ok(());
        }
        let known: Vec<&str> = self
            .inner
            .config
            .providers
            .keys()
            .map(String::as_str)
            .collect();
        Err(RuntimeError::invalid(
            "model",
            format!(
                "`{model}` is not a configured provider (configured: {})",
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ),
        ))
    }
}

/// Agent names are path components and message addresses: lowercase letters, digits, `-`
/// and `_`, starting with a letter or digit, at most 40 characters.
pub fn check_name(name: &str) -> Result<(), RuntimeError> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name != "operator";
    if ok {
        Ok(())
    } else {
        Err(RuntimeError::invalid(
            "name",
            format!(
                "{name:?} is not a valid agent name (1-40 of a-z 0-9 - _, starting with a letter \
                 or digit, not `operator`)"
            ),
        ))
    }
}
