//! Routines declared rather than made: at every start the `[routines.NAME]` of the
//! configuration, the templates' `schedule` and the `[heartbeat]` of each chosen agent are
//! put into the store (a changed definition replaces the stored one, its fire history kept; a
//! vanished declaration is deleted), and a new agent chosen by `[heartbeat]` gets its
//! routine when it is spawned.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_core::Action;
use reef_schedule::check_routine;
use reef_store::{NewRoutine, PutOutcome, RoutineSource};

impl Runtime {
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
