//! What each fire of a routine does: which missed fires run after downtime (`catch_up`),
//! what a fire does while an earlier run is going (`concurrency`), and the effect it is
//! claimed with (the message, the agent to spawn, or a failure naming the missing target).

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use chrono::{DateTime, SecondsFormat, Utc};
use reef_core::{Action, CatchUp, Concurrency};
use reef_schedule::MAX_NAP;
use reef_store::{ClaimGuard, FireClaim, FireEffect, JobState, Letter, RoutineRecord};

/// A fire older than this when the scheduler looks counts as missed (the clock jumped, or
/// the machine slept): one nap and a margin.
pub(crate) const LATE: chrono::Duration = chrono::Duration::seconds(MAX_NAP.as_secs() as i64 + 30);

/// One fire of a routine, before it is claimed.
#[derive(Clone, Debug)]
pub(crate) struct Fire {
    /// Its identity within the routine (`at:MS`, `event:SEQ`, `manual:ID`, `hook:SIG`).
    pub key: String,
    pub at: DateTime<Utc>,
    /// What caused it, for the message: `scheduled 2026-11-23T20:10:04Z`.
    pub cause: String,
    /// Timed fires move the routine's watermark.
    pub timed: bool,
}

impl Fire {
    pub(crate) fn timed(at: DateTime<Utc>) -> Fire {
        Fire {
            key: format!("at:{}", at.timestamp_millis()),
            at,
            cause: format!("scheduled {}", rfc3339(at)),
            timed: true,
        }
    }
}

pub(crate) fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Splits timed fires into those to run and those to skip: a fire that fell due before the
/// scheduler started, or more than [`LATE`] ago, was missed and follows `catch_up`; the
/// others run. The reason says why a fire is skipped.
pub(crate) fn sort_out(
    record: &RoutineRecord,
    instants: Vec<DateTime<Utc>>,
    started: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Vec<(Fire, Option<String>)> {
    let (missed, current): (Vec<_>, Vec<_>) = instants
        .into_iter()
        .partition(|t| *t <= started || *t < now - LATE);
    let guard = &record.spec.guardrails;
    let keep = match guard.catch_up {
        CatchUp::Skip => 0,
        CatchUp::Once => 1,
        CatchUp::All => guard.catch_up_max as usize,
    };
    let first_kept = missed.len().saturating_sub(keep);
    let mut out = Vec::new();
    for (i, at) in missed.into_iter().enumerate() {
        let skip = (i < first_kept).then(|| {
            format!(
                "missed while reef was not running (catch_up = {})",
                match guard.catch_up {
                    CatchUp::Skip => "skip",
                    CatchUp::Once => "once: only the newest runs",
                    CatchUp::All => "all, beyond catch_up_max",
                }
            )
        });
        out.push((Fire::timed(at), skip));
    }
    out.extend(current.into_iter().map(|at| (Fire::timed(at), None)));
    out
}

/// A fire ready to claim, and whether a run it starts replaces those going.
pub(crate) struct Planned {
    pub claim: FireClaim,
    /// `concurrency = "replace"`: once this fire's job exists, the routine's older open jobs
    /// are cancelled.
    pub replaces: bool,
}

/// The claim for `fire`. A fire that is run while another run of the routine is going
/// follows `concurrency`, decided in the claim's own transaction (`skip`) or after it commits
/// (`replace`). Fires after the first of one pass (missed fires caught up with
/// `catch_up = "all"`) run one after another whatever `concurrency` says: they were asked for.
/// A webhook or event fire within `cooldown` of the last run is skipped, in the transaction.
pub(crate) async fn claim(
    rt: &Runtime,
    record: &RoutineRecord,
    fire: &Fire,
    skip: Option<String>,
    later_in_pass: bool,
) -> Result<Planned, RuntimeError> {
    let concurrency = record.spec.guardrails.concurrency;
    let cooldown_ms = if fire.timed {
        0
    } else {
        i64::try_from(record.spec.guardrails.cooldown_secs)
            .unwrap_or(i64::MAX / 1000)
            .saturating_mul(1000)
    };
    let claim = |effect| Planned {
        claim: FireClaim {
            routine_id: record.id.clone(),
            key: fire.key.clone(),
            scheduled_ms: fire.at.timestamp_millis(),
            advance_watermark: fire.timed,
            guard: ClaimGuard {
                skip_if_running: concurrency == Concurrency::Skip && !later_in_pass,
                cooldown_ms: if fire.key.starts_with("manual:") {
                    0
                } else {
                    cooldown_ms
                },
            },
            effect,
        },
        replaces: concurrency == Concurrency::Replace && !later_in_pass,
    };
    if let Some(reason) = skip {
        return Ok(claim(FireEffect::Skip { reason }));
    }
    if !record.enabled {
        return Ok(claim(FireEffect::Skip {
            reason: "the routine is disabled".into(),
        }));
    }
    if let Some(reason) = day_budget_spent(rt, record).await? {
        return Ok(claim(FireEffect::Skip { reason }));
    }
    // An agent's routines fire only while it runs (paused, stopped or out of budget: not),
    // within its budget, and only at it or its children.
    let owner = match (&record.owner, record.source) {
        (Some(owner), reef_store::RoutineSource::Agent) => rt.store().get_agent(owner).await?,
        _ => None,
    };
    if let Some(owner) = &owner {
        if owner.state != reef_core::AgentState::Running {
            return Ok(claim(FireEffect::Skip {
                reason: format!("its owner {} is {}", owner.name, owner.state.as_str()),
            }));
        }
        if let Some(reason) = owner_budget_spent(rt, record, owner).await? {
            return Ok(claim(FireEffect::Skip { reason }));
        }
    }
    let effect = match &record.spec.action {
        Action::Message { agent, text } => match rt.store().agent_by_name(agent).await? {
            None => FireEffect::Fail {
                reason: format!("agent `{agent}` does not exist"),
            },
            Some(found) if found.state.is_final() => FireEffect::Fail {
                reason: format!("agent `{agent}` is {}", found.state.as_str()),
            },
            // The name may belong to another agent now than when the routine was made.
            Some(found)
                if owner
                    .as_ref()
                    .is_some_and(|o| found.id != o.id && found.parent.as_ref() != Some(&o.id)) =>
            {
                FireEffect::Fail {
                    reason: format!("agent `{agent}` is no longer the owner's or its child's"),
                }
            }
            Some(found) => FireEffect::Deliver(Letter {
                to: found.id,
                sender: format!("routine:{}", record.name),
                body: format!("[routine {}, {}] {text}", record.name, fire.cause),
                dedup_key: format!("routine:{}:{}", record.id, fire.key),
                request_id: None,
            }),
        },
        Action::Heartbeat {
            agent,
            active_hours,
            tz,
        } => match rt.store().agent_by_name(agent).await? {
            None => FireEffect::Fail {
                reason: format!("agent `{agent}` does not exist"),
            },
            Some(found) if found.state != reef_core::AgentState::Running => FireEffect::Skip {
                reason: format!("agent `{agent}` is {}", found.state.as_str()),
            },
            Some(found) => {
                super::heartbeat::effect(rt, record, &found, (active_hours.as_deref(), tz), fire)
                    .await?
            }
        },
        Action::Spawn { template, .. } => {
            if rt.templates().get(template).is_none() {
                FireEffect::Fail {
                    reason: format!("template `{template}` does not exist"),
                }
            } else {
                FireEffect::Spawn {
                    name_prefix: name_prefix(&record.name),
                }
            }
        }
    };
    Ok(claim(effect))
}

/// Why an agent's routine may not run: the owner's life budget, counting what its routine
/// runs have used, is spent.
async fn owner_budget_spent(
    rt: &Runtime,
    record: &RoutineRecord,
    owner: &reef_store::AgentRecord,
) -> Result<Option<String>, RuntimeError> {
    let (limit_tokens, limit_cost) = (owner.budget.tokens, owner.budget.cost_micros);
    if limit_tokens.is_none() && limit_cost.is_none() {
        return Ok(None);
    }
    let (own, own_cost) = rt.store().agent_usage(&owner.id).await?;
    let (runs, runs_cost) = rt.store().routine_spend_since(&record.id, "").await?;
    let tokens = own.input_tokens + own.output_tokens + runs;
    let cost = own_cost + runs_cost;
    if let Some(limit) = limit_tokens
        && tokens >= limit
    {
        return Ok(Some(format!(
            "its owner {} has used {tokens} of its {limit} tokens, its routine's runs included",
            owner.name
        )));
    }
    if let Some(limit) = limit_cost
        && cost >= limit
    {
        return Ok(Some(format!(
            "its owner {} has spent ${:.4} of its ${:.4}, its routine's runs included",
            owner.name,
            cost as f64 / 1e6,
            limit as f64 / 1e6
        )));
    }
    Ok(None)
}

/// Why the routine may not run again today (UTC), if its day's tokens or money are spent.
async fn day_budget_spent(
    rt: &Runtime,
    record: &RoutineRecord,
) -> Result<Option<String>, RuntimeError> {
    let guard = &record.spec.guardrails;
    if guard.day_tokens.is_none() && guard.day_cost_micros.is_none() {
        return Ok(None);
    }
    let (tokens, cost) = rt
        .store()
        .routine_spend_since(&record.id, &reef_store::start_of_today())
        .await?;
    if let Some(limit) = guard.day_tokens
        && tokens >= limit
    {
        return Ok(Some(format!(
            "today's runs used {tokens} tokens of day_tokens = {limit}"
        )));
    }
    if let Some(limit) = guard.day_cost_micros
        && cost >= limit
    {
        return Ok(Some(format!(
            "today's runs cost ${:.4} of day_cost = ${:.4}",
            cost as f64 / 1e6,
            limit as f64 / 1e6
        )));
    }
    Ok(None)
}

/// The start of a spawned run's agent name (`NAME-…` with the job's number after it),
/// short enough for an agent name.
fn name_prefix(routine: &str) -> String {
    let cut: String = routine.chars().take(28).collect();
    cut.trim_end_matches(['-', '_']).to_owned()
}

/// Cancels an open routine job: a spawned run's agent is destroyed (its transcript kept), a
/// turn is interrupted and its message dropped.
pub(crate) async fn cancel(rt: &Runtime, job: u64, reason: &str) -> Result<(), RuntimeError> {
    if let Some(record) = rt.store().job(job).await? {
        rt.stop_job(&record, JobState::Cancelled, reason).await?;
    }
    Ok(())
}
