//! Routines and jobs as the operator, the API and agents see them: create, edit, enable,
//! disable, delete, run by hand, read the fire history; list, inspect and cancel jobs. At
//! start the `[routines.NAME]` of the configuration and the templates' `schedule` are
//! reconciled into the store: a changed definition replaces the stored one, its fire history
//! is kept, and a declaration that disappeared is deleted.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use crate::scheduler::{fire_now, from_ms, plan::Fire};
use chrono::{DateTime, Utc};
use reef_core::{Action, AgentId, RoutineSpec, Trigger};
use reef_schedule::{check_routine, schedule_of};
use reef_store::{
    Claimed, FireRecord, JobRecord, JobState, NewRoutine, PutOutcome, RoutineRecord, RoutineSource,
};
use serde::Serialize;

/// A routine with its next timed fire.
#[derive(Clone, Debug, Serialize)]
pub struct RoutineView {
    #[serde(flatten)]
    pub record: RoutineRecord,
    /// The next timed fire (RFC 3339), when enabled and timed.
    pub next: Option<String>,
}

/// A routine to create: who asks decides its source and owner.
#[derive(Clone, Debug)]
pub struct RoutineRequest {
    pub name: String,
    pub spec: RoutineSpec,
    pub enabled: bool,
}

impl Runtime {
    fn now_ms(&self) -> i64 {
        let now = self.inner.scheduler.clock.now().timestamp_millis();
        // Intervals count from a whole second, so fires land on whole seconds.
        now - now.rem_euclid(1000)
    }

    /// Checks a definition: valid expressions and interval, and a target that exists.
    async fn check_spec(&self, name: &str, spec: &RoutineSpec) -> Result<(), RuntimeError> {
        if !reef_config::valid_routine_name(name) {
            return Err(RuntimeError::invalid(
                "name",
                format!(
                    "{name:?} is not a routine name (1-64 of a-z 0-9 - _, starting with a letter)"
                ),
            ));
        }
        check_routine(spec, self.config().scheduler.min_interval)
            .map_err(|e| RuntimeError::invalid(e.field, e.message))?;
        match &spec.action {
            Action::Message { agent, .. } => match self.agent(agent).await {
                Ok(_) => {}
                Err(RuntimeError::NotFound(message)) => {
                    return Err(RuntimeError::invalid("agent", message));
                }
                Err(err) => return Err(err),
            },
            Action::Heartbeat { agent, .. } => {
                self.agent(agent).await?;
            }
            Action::Spawn { template, .. } => {
                if self.templates().get(template).is_none() {
                    return Err(RuntimeError::invalid(
                        "template",
                        format!(
                            "no template named `{template}`; available: {}",
                            self.templates().names().join(", ")
                        ),
                    ));
                }
            }
        }
        if let Trigger::Webhook { hook } = &spec.trigger {
            let routed = self.config().hooks.hooks.get(hook).map(|h| &h.route);
            if routed != Some(&reef_config::HookRoute::Routine(name.to_owned())) {
                return Err(RuntimeError::invalid(
                    "webhook",
                    format!(
                        "[hooks.{hook}] does not fire this routine; a hook fires the routine that \
                         names it in reef.toml ([routines.{name}] webhook = \"{hook}\")"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Creates a routine for the operator, or for `owner` (an agent's, bounded by it and
    /// deleted with it).
    pub async fn create_routine(
        &self,
        req: RoutineRequest,
        owner: Option<&AgentId>,
    ) -> Result<RoutineRecord, RuntimeError> {
        self.check_spec(&req.name, &req.spec).await?;
        let source = if owner.is_some() {
            RoutineSource::Agent
        } else {
            RoutineSource::Operator
        };
        let record = self
            .store()
            .create_routine(
                NewRoutine {
                    name: req.name,
                    spec: req.spec,
                    enabled: req.enabled,
                    source,
                    owner: owner.cloned(),
                },
                self.now_ms(),
            )
            .await?;
        self.inner.scheduler.changed_routine(&record.name);
        self.bus().poke();
        Ok(record)
    }

    /// Replaces a routine's definition; its fire history is kept.
    pub async fn edit_routine(
        &self,
        name: &str,
        spec: RoutineSpec,
    ) -> Result<RoutineRecord, RuntimeError> {
        let old = self.routine_record(name).await?;
        self.check_spec(name, &spec).await?;
        let (record, _) = self
            .store()
            .put_routine(
                NewRoutine {
                    name: name.to_owned(),
                    spec,
                    enabled: old.enabled,
                    source: old.source,
                    owner: old.owner,
                },
                self.now_ms(),
            )
            .await?;
        self.inner.scheduler.changed_routine(name);
        self.bus().poke();
        Ok(record)
    }

    pub async fn delete_routine(&self, name: &str) -> Result<(), RuntimeError> {
        if !self.store().delete_routine(name).await? {
            return Err(not_found(name));
        }
        self.inner.scheduler.changed_routine(name);
        self.bus().poke();
        Ok(())
    }

    /// Enables (clearing its failures; nothing missed meanwhile is caught up) or disables.
    pub async fn set_routine_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> Result<RoutineRecord, RuntimeError> {
        self.routine_record(name).await?;
        let reason = (!enabled).then(|| "disabled by the operator".to_owned());
        let record = self
            .store()
            .set_routine_enabled(name, enabled, reason, self.now_ms())
            .await?;
        self.inner.scheduler.changed_routine(name);
        self.bus().poke();
        Ok(record)
    }

    /// Fires a routine now, whatever its trigger (`reef routine run`).
    pub async fn run_routine(&self, name: &str) -> Result<Claimed, RuntimeError> {
        let record = self.routine_record(name).await?;
        let now = self.inner.scheduler.clock.now();
        let fire = Fire {
            key: format!("manual:{}", uuid::Uuid::now_v7().simple()),
            at: now,
            cause: format!("run by hand at {}", crate::scheduler::plan::rfc3339(now)),
            timed: false,
        };
        fire_now(self, &record, fire).await
    }

    /// Fires a webhook routine for a delivery identified by `key` (its signature).
    pub async fn fire_hook_routine(
        &self,
        name: &str,
        key: &str,
        body: &str,
    ) -> Result<Claimed, RuntimeError> {
        let record = self.routine_record(name).await?;
        // The hook was routed when the configuration was read: the routine must still be the
        // one that names it.
        if !matches!(&record.spec.trigger, Trigger::Webhook { .. }) {
            return Err(RuntimeError::Conflict(format!(
                "routine `{name}` is no longer fired by a webhook"
            )));
        }
        let now = self.inner.scheduler.clock.now();
        let fire = Fire {
            key: format!("hook:{key}"),
            at: now,
            cause: format!(
                "webhook delivery at {}: {body}",
                crate::scheduler::plan::rfc3339(now)
            ),
            timed: false,
        };
        fire_now(self, &record, fire).await
    }

    pub async fn list_routines(&self) -> Result<Vec<RoutineView>, RuntimeError> {
        let now = self.inner.scheduler.clock.now();
        Ok(self
            .store()
            .list_routines()
            .await?
            .into_iter()
            .map(|record| view(record, now))
            .collect())
    }

    pub async fn routine(&self, name: &str) -> Result<RoutineView, RuntimeError> {
        let record = self.routine_record(name).await?;
        Ok(view(record, self.inner.scheduler.clock.now()))
    }

    /// The routine's fires, newest first.
    pub async fn routine_history(
        &self,
        name: &str,
        limit: usize,
    ) -> Result<Vec<FireRecord>, RuntimeError> {
        let record = self.routine_record(name).await?;
        Ok(self.store().routine_fires(&record.id, limit).await?)
    }

    async fn routine_record(&self, name: &str) -> Result<RoutineRecord, RuntimeError> {
        self.store()
            .routine_by_name(name)
            .await?
            .ok_or_else(|| not_found(name))
    }

    /// Jobs, newest first.
    pub async fn list_jobs(
        &self,
        state: Option<JobState>,
        limit: usize,
    ) -> Result<Vec<JobRecord>, RuntimeError> {
        Ok(self.store().list_jobs(state, None, limit).await?)
    }

    pub async fn job(&self, id: u64) -> Result<JobRecord, RuntimeError> {
        self.store().job(id).await?.ok_or_else(|| {
            RuntimeError::NotFound(format!("no job {id}; `reef job list` shows them"))
        })
    }

    /// Cancels a job that has not ended; a spawned run's agent is destroyed.
    pub async fn cancel_job(&self, id: u64) -> Result<JobRecord, RuntimeError> {
        let job = self.job(id).await?;
        if job.state.is_final() {
            return Err(RuntimeError::Conflict(format!(
                "job {id} is already {}",
                job.state.as_str()
            )));
        }
        crate::scheduler::plan::cancel(self, id, "cancelled by the operator").await?;
        self.inner.scheduler.poke();
        self.job(id).await
    }

    /// Puts the configuration's routines and the templates' schedules into the store.
    pub(crate) async fn reconcile_routines(&self) -> Result<(), RuntimeError> {
        let now = self.now_ms();
        let mut declared = Vec::new();
        for routine in self.config().routines.values() {
            declared.push((
                routine.name.clone(),
                routine.spec.clone(),
                routine.enabled,
                RoutineSource::Config,
            ));
        }
        for template in self.templates().iter() {
            if let Some(spec) = template.schedule_spec() {
                declared.push((
                    format!("{}-cron", template.name),
                    spec,
                    true,
                    RoutineSource::Template,
                ));
            }
        }
        let mut owners = std::collections::HashMap::new();
        if let Some(heartbeat) = &self.config().heartbeat {
            for agent in self.store().list_agents().await? {
                if !agent.state.is_final()
                    && !agent.ephemeral
                    && heartbeat.selects(&agent.name, &agent.template)
                {
                    let name = crate::scheduler::heartbeat::routine_name(&agent.name);
                    owners.insert(name.clone(), agent.id.clone());
                    declared.push((
                        name,
                        crate::scheduler::heartbeat::spec(heartbeat, &agent.name),
                        true,
                        RoutineSource::Heartbeat,
                    ));
                }
            }
        }
        let mut names = Vec::new();
        for (name, spec, enabled, source) in declared {
            // Config routines were checked when the file was read; a template's schedule and
            // a heartbeat are checked here, against `scheduler.min_interval`.
            check_routine(&spec, self.config().scheduler.min_interval)
                .map_err(|e| RuntimeError::invalid(&format!("{name}.{}", e.field), e.message))?;
            if let Action::Message { agent, .. } = &spec.action
                && self.store().agent_by_name(agent).await?.is_none()
            {
                tracing::warn!(routine = %name, %agent, "the routine's agent does not exist yet; its fires fail until it does");
            }
            let (_, outcome) = self
                .store()
                .put_routine(
                    NewRoutine {
                        name: name.clone(),
                        spec,
                        enabled,
                        source,
                        owner: owners.get(&name).cloned(),
                    },
                    now,
                )
                .await?;
            if outcome != PutOutcome::Unchanged {
                tracing::info!(routine = %name, ?outcome, "routine reconciled");
            } else {
                self.apply_declared_enabled(&name, enabled, now).await?;
            }
            names.push(name);
        }
        for stored in self.store().list_routines().await? {
            let declarative = matches!(
                stored.source,
                RoutineSource::Config | RoutineSource::Template | RoutineSource::Heartbeat
            );
            if declarative && !names.contains(&stored.name) {
                self.store().delete_routine(&stored.name).await?;
            }
        }
        self.inner.scheduler.changed();
        Ok(())
    }
}

/// Why a routine is off when `reef.toml` says `enabled = false`.
const DISABLED_IN_CONFIG: &str = "disabled in reef.toml";

impl Runtime {
    /// `enabled` in `reef.toml` for a routine whose definition did not change: `false` turns
    /// it off; `true` turns back on only what the file had turned off (not a routine
    /// disabled by failures or by the operator).
    async fn apply_declared_enabled(
        &self,
        name: &str,
        enabled: bool,
        now: i64,
    ) -> Result<(), RuntimeError> {
        let Some(stored) = self.store().routine_by_name(name).await? else {
            return Ok(());
        };
        if !enabled && stored.enabled {
            self.store()
                .set_routine_enabled(name, false, Some(DISABLED_IN_CONFIG.into()), now)
                .await?;
        } else if enabled
            && !stored.enabled
            && stored.disabled_reason.as_deref() == Some(DISABLED_IN_CONFIG)
        {
            self.store()
                .set_routine_enabled(name, true, None, now)
                .await?;
        }
        Ok(())
    }

    /// Gives a new agent its heartbeat when `[heartbeat]` chooses it.
    pub(crate) async fn ensure_heartbeat(
        &self,
        agent: &reef_store::AgentRecord,
    ) -> Result<(), RuntimeError> {
        let Some(heartbeat) = &self.config().heartbeat else {
            return Ok(());
        };
        if agent.ephemeral || !heartbeat.selects(&agent.name, &agent.template) {
            return Ok(());
        }
        self.store()
            .put_routine(
                NewRoutine {
                    name: crate::scheduler::heartbeat::routine_name(&agent.name),
                    spec: crate::scheduler::heartbeat::spec(heartbeat, &agent.name),
                    enabled: true,
                    source: RoutineSource::Heartbeat,
                    owner: Some(agent.id.clone()),
                },
                self.now_ms(),
            )
            .await?;
        self.inner
            .scheduler
            .changed_routine(&crate::scheduler::heartbeat::routine_name(&agent.name));
        Ok(())
    }
}

fn not_found(name: &str) -> RuntimeError {
    RuntimeError::NotFound(format!(
        "no routine named `{name}`; `reef routine list` shows them"
    ))
}

fn view(record: RoutineRecord, now: DateTime<Utc>) -> RoutineView {
    let next = if record.enabled {
        schedule_of(&record.spec.trigger, from_ms(record.anchor_ms))
            .ok()
            .flatten()
            .and_then(|s| s.next_after(from_ms(record.watermark_ms).max(now)))
            .map(crate::scheduler::plan::rfc3339)
    } else {
        None
    };
    RoutineView { record, next }
}
