//! Agent rows: creating an agent (unique name), reading and listing them, and moving one
//! through its lifecycle. Every change commits together with its event.

use crate::error::StoreError;
use crate::events::insert_event;
use crate::sql::{Conn, OptionalExtension, Row, TransactionBehavior, params};
use crate::store::Store;
use crate::store::from_sql_int;
use reef_core::{AgentId, AgentState, Budget, Capabilities, SessionId, Usage};
use serde::Serialize;
use serde_json::json;

/// What it takes to create an agent; it starts `pending`.
#[derive(Clone, Debug, PartialEq)]
pub struct NewAgent {
    pub id: AgentId,
    pub name: String,
    pub template: String,
    pub persona: String,
    /// Provider name; `None` uses the default provider.
    pub model: Option<String>,
    pub workspace: String,
    pub capabilities: Capabilities,
    pub budget: Budget,
    pub parent: Option<AgentId>,
    /// Destroyed once its task is done.
    pub ephemeral: bool,
}

/// An agent as stored.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentRecord {
    pub id: AgentId,
    pub name: String,
    pub template: String,
    pub persona: String,
    pub model: Option<String>,
    pub workspace: String,
    pub capabilities: Capabilities,
    pub budget: Budget,
    pub state: AgentState,
    pub parent: Option<AgentId>,
    /// The session holding the agent's transcript, once it has run.
    pub session: Option<SessionId>,
    /// Destroyed once its task is done (webhook and per-request agents).
    pub ephemeral: bool,
    pub created_at: String,
    pub updated_at: String,
}

const COLUMNS: &str = "id, name, template, persona, model, workspace, capabilities, budget, \
                       state, parent_id, session_id, created_at, updated_at, ephemeral";

impl Store {
    /// Creates a `pending` agent and records `agent.spawned`. A taken name is a `Conflict`.
    pub async fn create_agent(&self, new: NewAgent) -> Result<AgentRecord, StoreError> {
        self.run(move |db| {
            let capabilities = to_json(&new.capabilities, "capabilities")?;
            let budget = to_json(&new.budget, "budget")?;
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            if agent_where(&tx, "name = ?1", &new.name)?.is_some() {
                return Err(StoreError::Conflict(format!(
                    "an agent named `{}` already exists; choose another name or destroy it first",
                    new.name
                )));
            }
            let now = db.clock.now();
            tx.prepare_cached(
                "INSERT INTO agents (id, name, template, persona, model, workspace, capabilities,
                                     budget, state, parent_id, session_id, created_at, updated_at,
                                     ephemeral)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, NULL, ?10, ?10, ?11)",
            )?
            .execute(params![
                new.id.as_str(),
                new.name,
                new.template,
                new.persona,
                new.model,
                new.workspace,
                capabilities,
                budget,
                new.parent.as_ref().map(AgentId::as_str),
                now,
                new.ephemeral
            ])?;
            insert_event(
                &tx,
                &now,
                "agent.spawned",
                Some(&new.id),
                &json!({"name": new.name, "template": new.template,
                        "parent": new.parent.as_ref().map(AgentId::as_str)}),
            )?;
            tx.commit()?;
            Ok(AgentRecord {
                id: new.id,
                name: new.name,
                template: new.template,
                persona: new.persona,
                model: new.model,
                workspace: new.workspace,
                capabilities: new.capabilities,
                budget: new.budget,
                state: AgentState::Pending,
                parent: new.parent,
                session: None,
                ephemeral: new.ephemeral,
                created_at: now.clone(),
                updated_at: now,
            })
        })
        .await
    }

    pub async fn get_agent(&self, id: &AgentId) -> Result<Option<AgentRecord>, StoreError> {
        let id = id.clone();
        self.run(move |db| agent_where(&db.conn, "id = ?1", id.as_str()))
            .await
    }

    pub async fn agent_by_name(&self, name: &str) -> Result<Option<AgentRecord>, StoreError> {
        let name = name.to_owned();
        self.run(move |db| agent_where(&db.conn, "name = ?1", &name))
            .await
    }

    /// Every agent, oldest first.
    pub async fn list_agents(&self) -> Result<Vec<AgentRecord>, StoreError> {
        self.run(|db| {
            let mut stmt = db.conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM agents ORDER BY created_at, id"
            ))?;
            let rows = stmt.query_map(params![], raw_agent)?;
            let mut out = Vec::new();
            for row in rows {
                out.push(row?.decode()?);
            }
            Ok(out)
        })
        .await
    }

    /// Moves the agent to `to` if its lifecycle allows it from the state it is in now, and
    /// records `agent.state_changed` with the reason; both commit together.
    pub async fn transition_agent(
        &self,
        id: &AgentId,
        to: AgentState,
        reason: &str,
    ) -> Result<AgentRecord, StoreError> {
        let id = id.clone();
        let reason = reason.to_owned();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(mut agent) = agent_where(&tx, "id = ?1", id.as_str())? else {
                return Err(StoreError::NotFound(format!("agent {id}")));
            };
            let from = agent.state;
            agent.state = from.transition(to)?;
            let now = db.clock.now();
            tx.prepare_cached("UPDATE agents SET state = ?1, updated_at = ?2 WHERE id = ?3")?
                .execute(params![to.as_str(), now, id.as_str()])?;
            insert_event(
                &tx,
                &now,
                "agent.state_changed",
                Some(&id),
                &json!({"from": from, "to": to, "reason": reason}),
            )?;
            if to.is_final() {
                // Its runs will not finish: they fail, and count against their routines.
                let why = format!("agent {} is {}: {reason}", agent.name, to.as_str());
                end_open_jobs_in(&tx, &now, &id, crate::jobs::JobState::Failed, &why)?;
            }
            tx.commit()?;
            agent.updated_at = now;
            Ok(agent)
        })
        .await
    }
    /// Records the session holding the agent's transcript.
    pub async fn set_agent_session(
        &self,
        id: &AgentId,
        session: &SessionId,
    ) -> Result<(), StoreError> {
        let (id, session) = (id.clone(), session.clone());
        self.run(move |db| {
            let now = db.clock.now();
            let changed = db
                .conn
                .prepare_cached("UPDATE agents SET session_id = ?1, updated_at = ?2 WHERE id = ?3")?
                .execute(params![session.as_str(), now, id.as_str()])?;
            if changed == 0 {
                return Err(StoreError::NotFound(format!("agent {id}")));
            }
            Ok(())
        })
        .await
    }

    /// Changes the agent's model (provider name; `None` = the default provider) and/or
    /// persona, recording `agent.updated`.
    pub async fn update_agent(
        &self,
        id: &AgentId,
        model: Option<Option<String>>,
        persona: Option<String>,
    ) -> Result<AgentRecord, StoreError> {
        let id = id.clone();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(mut agent) = agent_where(&tx, "id = ?1", id.as_str())? else {
                return Err(StoreError::NotFound(format!("agent {id}")));
            };
            let now = db.clock.now();
            if let Some(model) = &model {
                agent.model.clone_from(model);
            }
            if let Some(persona) = &persona {
                agent.persona.clone_from(persona);
            }
            tx.prepare_cached(
                "UPDATE agents SET model = ?1, persona = ?2, updated_at = ?3 WHERE id = ?4",
            )?
            .execute(params![agent.model, agent.persona, now, id.as_str()])?;
            insert_event(
                &tx,
                &now,
                "agent.updated",
                Some(&id),
                &json!({"model": model.map(|m| m.unwrap_or_else(|| "(default)".into())),
                        "persona_changed": persona.is_some()}),
            )?;
            tx.commit()?;
            agent.updated_at = now;
            Ok(agent)
        })
        .await
    }

    /// Deletes the agent with its inbox and room memberships, recording `agent.destroyed`.
    /// With `purge`, its session transcript goes too; otherwise the transcript stays readable.
    pub async fn delete_agent(&self, id: &AgentId, purge: bool) -> Result<(), StoreError> {
        let id = id.clone();
        self.run(move |db| {
            let tx = db
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            let Some(agent) = agent_where(&tx, "id = ?1", id.as_str())? else {
                return Err(StoreError::NotFound(format!("agent {id}")));
            };
            let now = db.clock.now();
            tx.prepare_cached("DELETE FROM agents WHERE id = ?1")?
                .execute(params![id.as_str()])?;
            // What it waited for, or was asked, closes with an event like any other.
            let open: Vec<(String, String)> = tx
                .prepare_cached(
                    "SELECT id, kind FROM pending
                     WHERE status = 'pending' AND (agent_id = ?1 OR target_id = ?1)",
                )?
                .query_map(params![id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            for (item, kind) in open {
                tx.prepare_cached(
                    "UPDATE pending SET status = 'cancelled', resolved_at = ?1 WHERE id = ?2",
                )?
                .execute(params![now, item])?;
                insert_event(
                    &tx,
                    &now,
                    &format!("{kind}.cancelled"),
                    Some(&id),
                    &json!({"id": item, "answer": null, "by": "destroyed"}),
                )?;
            }
            // Its routine runs end with it.
            let why = format!("agent {} was destroyed", agent.name);
            end_open_jobs_in(&tx, &now, &id, crate::jobs::JobState::Cancelled, &why)?;
            if let (true, Some(session)) = (purge, &agent.session) {
                tx.prepare_cached("DELETE FROM sessions WHERE id = ?1")?
                    .execute(params![session.as_str()])?;
            }
            insert_event(
                &tx,
                &now,
                "agent.destroyed",
                Some(&id),
                &json!({"name": agent.name, "purged": purge,
                        "session": if purge { None } else { agent.session.as_ref() }}),
            )?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Tokens the agent's session has used, as the providers reported them, and what they
    /// cost (millionths of a US dollar, over requests with a known price).
    pub async fn agent_usage(&self, id: &AgentId) -> Result<(Usage, u64), StoreError> {
        let id = id.clone();
        self.run(move |db| {
            let (input, output, cached, cost): (i64, i64, i64, i64) = db
                .conn
                .prepare_cached(
                    "SELECT COALESCE(SUM(u.input_tokens), 0), COALESCE(SUM(u.output_tokens), 0),
                            COALESCE(SUM(u.cached_input_tokens), 0),
                            COALESCE(SUM(u.cost_micros), 0)
                     FROM agents a JOIN model_usage u ON u.session_id = a.session_id
                     WHERE a.id = ?1",
                )?
                .query_row(params![id.as_str()], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?;
            let usage = Usage {
                input_tokens: from_sql_int(input, "input tokens")?,
                output_tokens: from_sql_int(output, "output tokens")?,
                cached_input_tokens: from_sql_int(cached, "cached tokens")?,
            };
            Ok((usage, from_sql_int(cost, "cost")?))
        })
        .await
    }
}

fn to_json<T: Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Corrupt(format!("cannot encode the agent's {what}: {e}")))
}

fn agent_where(
    conn: &Conn,
    condition: &str,
    value: &str,
) -> Result<Option<AgentRecord>, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM agents WHERE {condition}"))?
        .query_row(params![value], raw_agent)
        .optional()?
        .map(RawAgent::decode)
        .transpose()
}

/// The columns as SQLite returns them, before the JSON and enum columns are decoded.
struct RawAgent {
    id: String,
    name: String,
    template: String,
    persona: String,
    model: Option<String>,
    workspace: String,
    capabilities: String,
    budget: String,
    state: String,
    parent: Option<String>,
    session: Option<String>,
    created_at: String,
    updated_at: String,
    ephemeral: bool,
}

fn raw_agent(r: &Row<'_>) -> crate::sql::Result<RawAgent> {
    Ok(RawAgent {
        id: r.get(0)?,
        name: r.get(1)?,
        template: r.get(2)?,
        persona: r.get(3)?,
        model: r.get(4)?,
        workspace: r.get(5)?,
        capabilities: r.get(6)?,
        budget: r.get(7)?,
        state: r.get(8)?,
        parent: r.get(9)?,
        session: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
        ephemeral: r.get(13)?,
    })
}

impl RawAgent {
    fn decode(self) -> Result<AgentRecord, StoreError> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            StoreError::Corrupt(format!("agent {} has an invalid {what}: {e}", self.id))
        };
        let capabilities =
            serde_json::from_str(&self.capabilities).map_err(|e| corrupt("capabilities", &e))?;
        let budget = serde_json::from_str(&self.budget).map_err(|e| corrupt("budget", &e))?;
        let state = AgentState::parse(&self.state).ok_or_else(|| corrupt("state", &self.state))?;
        Ok(AgentRecord {
            id: AgentId::from_string(self.id),
            name: self.name,
            template: self.template,
            persona: self.persona,
            model: self.model,
            workspace: self.workspace,
            capabilities,
            budget,
            state,
            parent: self.parent.map(AgentId::from_string),
            session: self.session.map(SessionId::from_string),
            ephemeral: self.ephemeral,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// The name of agent `id` (its id when it no longer exists).
pub(crate) fn agent_name(conn: &Conn, id: &AgentId) -> Result<String, StoreError> {
    let name: Option<String> = conn
        .prepare_cached("SELECT name FROM agents WHERE id = ?1")?
        .query_row(params![id.as_str()], |r| r.get(0))
        .optional()?;
    Ok(name.unwrap_or_else(|| id.to_string()))
}

/// Ends every open job whose work is `agent`'s as `state` with `reason`.
fn end_open_jobs_in(
    tx: &Conn,
    now: &str,
    agent: &AgentId,
    state: crate::jobs::JobState,
    reason: &str,
) -> Result<(), StoreError> {
    let jobs: Vec<i64> = tx
        .prepare_cached(
            "SELECT id FROM jobs WHERE agent_id = ?1 AND state IN ('pending', 'running')",
        )?
        .query_map(params![agent.as_str()], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for job in jobs {
        let end = crate::jobs::JobEnd {
            state,
            reason: Some(reason.to_owned()),
            result: None,
        };
        crate::jobs::end_job_in(tx, now, from_sql_int(job, "job id")?, &end)?;
    }
    Ok(())
}
