//! Heartbeats: `[heartbeat]` gives each chosen agent a routine (`heartbeat-NAME`, owned by the
//! agent and deleted with it) that fires every `every`. A fire inside `active_hours` whose
//! agent is idle hands it its workspace's `HEARTBEAT.md` as a checklist; the store sends the
//! answer on unless it is only `HEARTBEAT_OK`. A beat never stacks on another (the routine's
//! `concurrency` is `skip`) and never queues behind work: a busy agent's beat is skipped.

use super::plan::Fire;
use crate::error::RuntimeError;
use crate::kernel::Runtime;
use chrono::Timelike;
use reef_config::HeartbeatConfig;
use reef_core::{Action, Guardrails, HEARTBEAT_OK, RoutineSpec, Trigger};
use reef_store::{AgentRecord, FireEffect, InboxStatus, Letter, RoutineRecord};
use reef_workspace::{Workspace, WorkspaceError};

/// The checklist file in an agent's workspace.
pub(crate) const CHECKLIST: &str = "HEARTBEAT.md";
/// A checklist larger than this is not read.
const CHECKLIST_MAX_BYTES: u64 = 64 * 1024;

pub(crate) fn routine_name(agent: &str) -> String {
    format!("heartbeat-{agent}")
}

/// The routine that gives `agent` its heartbeat.
pub(crate) fn spec(config: &HeartbeatConfig, agent: &str) -> RoutineSpec {
    RoutineSpec {
        trigger: Trigger::Every {
            millis: u64::try_from(config.every.as_millis()).unwrap_or(u64::MAX),
        },
        action: Action::Heartbeat {
            agent: agent.to_owned(),
            active_hours: config.active_hours.clone(),
            tz: config.tz.clone(),
        },
        guardrails: Guardrails {
            // A missed beat is not worth a burst after downtime.
            max_failures: 0,
            ..Guardrails::default()
        },
    }
}

/// What a heartbeat's fire does: skipped outside active hours, while the agent is busy or
/// without a checklist; otherwise the checklist as a message.
pub(crate) async fn effect(
    rt: &Runtime,
    record: &RoutineRecord,
    agent: &AgentRecord,
    (active_hours, tz): (Option<&str>, &str),
    fire: &Fire,
) -> Result<FireEffect, RuntimeError> {
    let skip = |reason: String| Ok(FireEffect::Skip { reason });
    if let Some(window) = active_hours
        && !within(window, tz, fire.at)
    {
        return skip(format!("outside active hours {window} ({tz})"));
    }
    let store = rt.store();
    let waiting = store.inbox(&agent.id, InboxStatus::Pending).await?.len()
        + store.inbox(&agent.id, InboxStatus::Processing).await?.len();
    if waiting > 0 {
        return skip(format!(
            "{} is busy ({waiting} messages waiting or in progress)",
            agent.name
        ));
    }
    let workspace = std::path::PathBuf::from(&agent.workspace);
    let read = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, WorkspaceError> {
        let ws = Workspace::open(&workspace)?;
        let rel = ws.resolve(CHECKLIST)?;
        ws.read(&rel, CHECKLIST_MAX_BYTES)
    })
    .await
    .map_err(|e| RuntimeError::Setup(format!("reading {CHECKLIST} stopped: {e}")))?;
    let checklist = match read {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) if !text.trim().is_empty() => text,
            Ok(_) => return skip(format!("{CHECKLIST} is empty")),
            Err(_) => return skip(format!("{CHECKLIST} is not UTF-8 text")),
        },
        Err(WorkspaceError::NotFound { .. }) => {
            return skip(format!("no {CHECKLIST} in {}'s workspace", agent.name));
        }
        // A link, a directory, a file too large: the agent's file is not trusted.
        Err(err) => return skip(format!("{CHECKLIST} was not read: {err}")),
    };
    Ok(FireEffect::Heartbeat(Letter {
        to: agent.id.clone(),
        sender: "heartbeat".into(),
        body: format!(
            "[heartbeat, {}] Go through this checklist from your {CHECKLIST}. If nothing needs \
             doing or reporting, answer exactly {HEARTBEAT_OK} and nothing else; otherwise do \
             what is needed and answer with what your owner should know.\n\n{}",
            fire.cause,
            checklist.trim_end()
        ),
        dedup_key: format!("routine:{}:{}", record.id, fire.key),
        request_id: None,
    }))
}

/// Whether `at` falls inside the `HH:MM-HH:MM` window read in zone `tz` (a window may wrap
/// past midnight). A window or zone that does not parse is treated as all day.
fn within(window: &str, tz: &str, at: chrono::DateTime<chrono::Utc>) -> bool {
    let (Ok((from, to)), Ok(zone)) = (
        reef_config::active_window(window),
        reef_schedule::parse_zone(tz),
    ) else {
        return true;
    };
    let local = at.with_timezone(&zone);
    let minute = local.hour() * 60 + local.minute();
    if from < to {
        (from..to).contains(&minute)
    } else {
        minute >= from || minute < to
    }
}
