//! Routines and jobs as the operator, the API and agents see them: create, edit, enable,
//! disable, delete, run by hand, read the fire history; list, inspect and cancel jobs. The
//! declared routines are put into the store by `reconcile.rs`.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use crate::scheduler::{fire_now, from_ms, plan::Fire};
use chrono::{DateTime, Utc};
use reef_core::{Action, AgentId, RoutineSpec, Trigger};
use reef_schedule::{check_routine, schedule_of};
use reef_store::{
    Claimed, FireRecord, JobRecord, JobState, NewRoutine, RoutineRecord, RoutineSource,
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
    pub(crate) fn now_ms(&self) -> i64 {
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
