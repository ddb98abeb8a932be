//! What follows a turn: its inbox messages are finished (a request gets the final text as
//! its reply), spent budgets stop the agent, and the parent hears of what went wrong.

use super::persist::until_stored;
use super::record;
use crate::error::RuntimeError;
use crate::kernel::Runtime;
use reef_core::{AgentState, TurnOutcome};
use reef_store::{AgentRecord, InboxMessage};
use serde_json::json;

/// Finishes a message the turn read; a request gets the final text as its reply in the same
/// transaction — unless the turn asked the operator something and completed, in which case
/// the reply waits for the answer (`asked`). A store that cannot be reached is waited for
/// (`persist::until_stored`); any other failure is logged, and the message stays claimed
/// until the next start releases it.
pub(super) async fn finish_message(
    rt: &Runtime,
    record: &AgentRecord,
    message: &InboxMessage,
    outcome: &TurnOutcome,
    asked: Option<&str>,
) {
    let store = rt.store();
    if let (Some(_), Some(question), TurnOutcome::Completed { .. }) =
        (&message.request_id, asked, outcome)
    {
        // The question carries the request: the turn that reads its answer replies.
        tracing::debug!(agent = %record.name, %question, "reply deferred to a question");
        until_stored(rt, &record.id, "an inbox message finished", || {
            store.complete_message(message.id, None)
        })
        .await;
        rt.bus().poke();
        return;
    }
    let finished = match outcome {
        TurnOutcome::Completed { text } => {
            let answer = if text.trim().is_empty() {
                "(finished without a text answer)".to_owned()
            } else {
                text.clone()
            };
            until_stored(rt, &record.id, "an inbox message finished", || {
                store.complete_message(message.id, Some(answer.clone()))
            })
            .await
        }
        // No answer: a request on the message is cancelled with the reason.
        other => {
            let reason = format!("{} {}", record.name, describe(other));
            until_stored(rt, &record.id, "an inbox message abandoned", || {
                store.abandon_message(message.id, &reason)
            })
            .await
        }
    };
    if let Some(Some(asker)) = finished {
        rt.wake(&asker);
    }
    rt.bus().poke();
}

/// What a turn's outcome means for the agent, once per turn: budgets that ran out stop it
/// and tell its parent; a loop, a failure or an overflow is reported. An error means the
/// agent's state could not be written: the caller tries again later.
pub(super) async fn after_turn(
    rt: &Runtime,
    record: &AgentRecord,
    inbox_id: u64,
    outcome: &TurnOutcome,
) -> Result<(), RuntimeError> {
    let budget = match outcome {
        TurnOutcome::MaxRounds { .. } => Some("rounds"),
        TurnOutcome::TimedOut { .. } => Some("wall_secs"),
        TurnOutcome::BudgetExceeded { .. } => Some("tokens"),
        TurnOutcome::CostExceeded { .. } => Some("cost_micros"),
        _ => None,
    };
    if let Some(kind) = budget {
        stop_for_budget(rt, record, &describe(outcome), kind).await?;
    } else if let TurnOutcome::LoopDetected { tool, repeats } = outcome {
        record::event(
            rt,
            &record.id,
            "agent.loop_detected",
            json!({"tool": tool, "repeats": repeats, "inbox_id": inbox_id}),
        )
        .await;
        tell_parent(
            rt,
            record,
            &format!(
                "Agent {} was stopped mid-turn: it called `{tool}` {repeats} times with the same \
                 arguments. Its message #{} was set aside.",
                record.name, inbox_id
            ),
            inbox_id,
        )
        .await;
    } else if let TurnOutcome::Failed { .. } | TurnOutcome::ContextOverflow { .. } = outcome {
        tell_parent(
            rt,
            record,
            &format!("Agent {}'s turn {}", record.name, describe(outcome)),
            inbox_id,
        )
        .await;
    }
    if record.ephemeral {
        reap_if_done(rt, record).await?;
    }
    rt.bus().poke();
    Ok(())
}

/// Destroys an ephemeral agent whose inbox has nothing left, from a task of its own (the
/// destroy waits for this worker to end).
pub(crate) async fn reap_if_done(rt: &Runtime, record: &AgentRecord) -> Result<(), RuntimeError> {
    let store = rt.store();
    let waiting = store
        .inbox(&record.id, reef_store::InboxStatus::Pending)
        .await?
        .len()
        + store
            .inbox(&record.id, reef_store::InboxStatus::Processing)
            .await?
            .len();
    if waiting > 0 {
        return Ok(());
    }
    let rt = rt.clone();
    let name = record.name.clone();
    tokio::spawn(async move {
        if let Err(err) = rt.destroy_agent(&name, false).await {
            tracing::warn!(agent = %name, error = %err, "cannot destroy a finished ephemeral agent");
        }
    });
    Ok(())
}

/// Fails the agent because a budget ran out, records `budget.exceeded`, tells the parent.
pub(super) async fn stop_for_budget(
    rt: &Runtime,
    record: &AgentRecord,
    reason: &str,
    kind: &str,
) -> Result<(), RuntimeError> {
    record::event(
        rt,
        &record.id,
        "budget.exceeded",
        json!({"budget": kind, "reason": reason}),
    )
    .await;
    rt.store()
        .transition_agent(
            &record.id,
            AgentState::Failed,
            &format!("budget exceeded: {reason}"),
        )
        .await?;
    tell_parent(
        rt,
        record,
        &format!(
            "Agent {} was stopped: budget exceeded ({reason}).",
            record.name
        ),
        0,
    )
    .await;
    rt.bus().poke();
    Ok(())
}

/// Fails the agent because it cannot run as configured, and tells its parent.
pub(super) async fn fail_agent(
    rt: &Runtime,
    record: &AgentRecord,
    reason: &str,
    inbox_id: u64,
) -> Result<(), RuntimeError> {
    rt.store()
        .transition_agent(&record.id, AgentState::Failed, reason)
        .await?;
    tell_parent(
        rt,
        record,
        &format!("Agent {} failed: {reason}", record.name),
        inbox_id,
    )
    .await;
    rt.bus().poke();
    Ok(())
}

async fn tell_parent(rt: &Runtime, record: &AgentRecord, text: &str, inbox_id: u64) {
    let Some(parent) = &record.parent else {
        return;
    };
    let key = format!(
        "notice:{}:{inbox_id}:{:016x}",
        record.id,
        crate::messaging::fnv64(text)
    );
    match rt.store().deliver(parent, &record.name, text, &key).await {
        Ok(_) => rt.wake(parent),
        Err(err) => tracing::warn!(agent = %record.name, error = %err, "cannot tell the parent"),
    }
}

/// How a turn ended, in words for the parent and the abandoned request.
pub(super) fn describe(outcome: &TurnOutcome) -> String {
    match outcome {
        TurnOutcome::Completed { .. } => "completed".into(),
        TurnOutcome::MaxRounds { limit } => format!("reached its limit of {limit} rounds"),
        TurnOutcome::TimedOut { limit_secs } => format!("ran past its {limit_secs} s turn budget"),
        TurnOutcome::BudgetExceeded { limit, used } => {
            format!("used {used} tokens of its remaining {limit}")
        }
        TurnOutcome::CostExceeded {
            limit_micros,
            used_micros,
        } => format!(
            "spent ${:.6} of its remaining ${:.6}",
            *used_micros as f64 / 1e6,
            *limit_micros as f64 / 1e6
        ),
        TurnOutcome::LoopDetected { tool, repeats } => {
            format!("repeated `{tool}` {repeats} times with the same arguments")
        }
        TurnOutcome::ContextOverflow { tokens, window } => format!(
            "could not read the message: with it the context is {tokens} tokens, more than the \
             model's {window}-token window"
        ),
        TurnOutcome::Interrupted => "interrupted".into(),
        TurnOutcome::Failed { error } => format!("failed: {error}"),
    }
}
