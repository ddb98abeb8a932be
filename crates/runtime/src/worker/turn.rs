//! One turn of a daemon agent, driven through its session's protocol handle: the claimed
//! message (with `collect`, every waiting one merged) goes in as user input; with `steer`,
//! messages that arrive meanwhile are claimed and steered into the running turn; every
//! event is recorded, and each message is finished with the outcome of the turn that read it.

use super::{MAX_ATTEMPTS, Next, STORE_RETRY, Worker, outcome, record, release};
use crate::kernel::{Runtime, lock};
use crate::tools::Current;
use reef_core::{EventMsg, Op, QueueMode, SubmissionId, TurnOutcome};
use reef_store::{AgentRecord, InboxMessage};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::watch;

impl Worker {
    pub(super) async fn drive_turn(
        &mut self,
        rt: &Runtime,
        record: &AgentRecord,
        first: InboxMessage,
        stop: &mut watch::Receiver<bool>,
    ) -> Next {
        let mode = queue_mode(rt, record);
        let mut messages = vec![first];
        if mode == QueueMode::Collect {
            messages.extend(claim_waiting(rt, record).await);
        }
        let Some(handle) = self.handle.as_mut() else {
            for message in &messages {
                release(rt, record, message).await;
            }
            return Next::Backoff(STORE_RETRY);
        };
        let input = merged_input(&messages);
        let ids: Vec<u64> = messages.iter().map(|m| m.id).collect();
        record::event(
            rt,
            &record.id,
            "turn.started",
            json!({"inbox_id": ids[0], "inbox_ids": ids, "from": messages[0].sender,
                   "attempt": messages[0].attempts, "queue_mode": mode}),
        )
        .await;
        if let Some(warning) = rt.sandbox_warning() {
            // Tools run unconfined: say so on every turn, where the operator watches.
            record::event(rt, &record.id, "agent.warning", json!({"message": warning})).await;
        }
        // Set before the turn starts, so its tools key their actions by this message.
        *lock(&self.ctx.current) = Some(current(&messages[0]));
        let sub = handle.submit(Op::UserInput { text: input });
        // The messages each submission answers; a steered one joins the turn that read it.
        let mut pending: HashMap<SubmissionId, Vec<InboxMessage>> =
            HashMap::from([(sub, messages)]);
        // Steered messages that found no round boundary: they make the next turn.
        let mut leftover: Vec<InboxMessage> = Vec::new();
        let mut backoff = None;
        let mut broken = None;
        while !pending.is_empty() || !leftover.is_empty() {
            if pending.is_empty() {
                let messages = std::mem::take(&mut leftover);
                if !still_running(rt, record).await {
                    for message in &messages {
                        release(rt, record, message).await;
                    }
                    break;
                }
                *lock(&self.ctx.current) = Some(current(&messages[0]));
                let sub = handle.submit(Op::UserInput {
                    text: merged_input(&messages),
                });
                pending.insert(sub, messages);
            }
            tokio::select! {
                // A turn that ended is settled before a stop is looked at.
                biased;
                event = handle.next_event() => {
                    let Some(event) = event else {
                        // The session loop ended under us: put everything back and reopen.
                        broken = Some(Next::Backoff(STORE_RETRY));
                        break;
                    };
                    let read = pending.get(&event.id);
                    let ids: Vec<u64> = read.map(|m| m.iter().map(|m| m.id).collect()).unwrap_or_default();
                    let senders: Vec<String> = read.map(|m| m.iter().map(|m| m.sender.clone()).collect()).unwrap_or_default();
                    match &event.msg {
                        EventMsg::SteerReturned { .. } => {
                            if let Some(returned) = pending.remove(&event.id) {
                                leftover.extend(returned);
                            }
                        }
                        EventMsg::Steered { steer_id, .. } => {
                            if let Some(steered) = pending.remove(steer_id)
                                && let Some(turn) = pending.get_mut(&event.id)
                            {
                                turn.extend(steered);
                            }
                        }
                        _ => {}
                    }
                    let ended = match &event.msg {
                        EventMsg::TurnEnded { outcome, .. } => Some(outcome.clone()),
                        _ => None,
                    };
                    let id = event.id.clone();
                    record::session_event(rt, &record.id, (&ids, &senders), event).await;
                    if let Some(outcome) = ended
                        && let Some(messages) = pending.remove(&id)
                    {
                        let asked = lock(&self.ctx.current)
                            .take()
                            .and_then(|c| c.questions.last().cloned());
                        if let Some(delay) = settle(rt, record, &messages, &outcome, asked.as_deref()).await {
                            backoff = Some(delay);
                        }
                    }
                }
                () = self.wake.notified(), if mode == QueueMode::Steer => {
                    for message in claim_waiting(rt, record).await {
                        let id = handle.submit(Op::Steer { text: turn_input(&message) });
                        pending.insert(id, vec![message]);
                    }
                }
                _ = stop.changed() => {
                    broken = Some(Next::Stop);
                    break;
                }
            }
        }
        let Some(next) = broken else {
            return backoff.map_or(Next::Idle, Next::Backoff);
        };
        // Shutdown, stop or a lost session: the messages go back to the inbox and run again
        // later (the transcript keeps what was done).
        self.close().await;
        for message in pending.values().flatten() {
            release(rt, record, message).await;
        }
        record::event(
            rt,
            &record.id,
            "turn.interrupted",
            json!({"inbox_id": inbox_ids(&pending).first(), "inbox_ids": inbox_ids(&pending)}),
        )
        .await;
        next
    }
}

/// Finishes the messages a turn read. A failed turn is not their fault: they go back to the
/// inbox to be tried again after the returned delay, until they have had `MAX_ATTEMPTS`.
async fn settle(
    rt: &Runtime,
    record: &AgentRecord,
    messages: &[InboxMessage],
    outcome: &TurnOutcome,
    asked: Option<&str>,
) -> Option<Duration> {
    let first = messages.first()?;
    if let TurnOutcome::Failed { error } = outcome
        && first.attempts < MAX_ATTEMPTS
    {
        let delay = Duration::from_secs((1u64 << (first.attempts.saturating_sub(1))).min(60));
        for message in messages {
            release(rt, record, message).await;
        }
        record::event(
            rt,
            &record.id,
            "turn.retry_scheduled",
            json!({"inbox_id": first.id, "attempt": first.attempts,
                   "error": error, "delay_secs": delay.as_secs()}),
        )
        .await;
        return Some(delay);
    }
    // Every message is finished (a failure is logged and the message stays claimed until the
    // next start releases it); what the outcome means for the agent happens once per turn.
    for (i, message) in messages.iter().enumerate() {
        let asked = if i == 0 { asked } else { None };
        outcome::finish_message(rt, record, message, outcome, asked).await;
    }
    if let Err(err) = outcome::after_turn(rt, record, first.id, outcome).await {
        tracing::warn!(agent = %record.name, error = %err, "cannot record the turn's end");
        return Some(STORE_RETRY);
    }
    None
}

/// Whether the agent may run another turn (not paused, stopped or failed meanwhile).
async fn still_running(rt: &Runtime, record: &AgentRecord) -> bool {
    match rt.store().get_agent(&record.id).await {
        Ok(Some(agent)) => agent.state == reef_core::AgentState::Running,
        Ok(None) => false,
        Err(err) => {
            tracing::warn!(agent = %record.name, error = %err, "cannot read the agent");
            false
        }
    }
}

/// The agent's queue mode: its template's, else `daemon.queue_mode`.
fn queue_mode(rt: &Runtime, record: &AgentRecord) -> QueueMode {
    rt.templates()
        .get(&record.template)
        .and_then(|t| t.queue_mode)
        .unwrap_or(rt.config().daemon.queue_mode)
}

/// Claims every message waiting in the agent's inbox.
async fn claim_waiting(rt: &Runtime, record: &AgentRecord) -> Vec<InboxMessage> {
    let mut out = Vec::new();
    loop {
        match rt.store().claim_next(&record.id).await {
            Ok(Some(message)) => out.push(message),
            Ok(None) => break,
            Err(err) => {
                // What is not claimed waits for the next turn.
                tracing::warn!(agent = %record.name, error = %err, "cannot claim a message");
                break;
            }
        }
    }
    if !out.is_empty() {
        rt.bus().poke();
    }
    out
}

fn current(message: &InboxMessage) -> Current {
    Current {
        inbox_id: message.id,
        request_id: message.request_id.clone(),
        actions: HashMap::new(),
        questions: Vec::new(),
    }
}

fn inbox_ids(pending: &HashMap<SubmissionId, Vec<InboxMessage>>) -> Vec<u64> {
    pending.values().flatten().map(|m| m.id).collect()
}

/// The turn input for one message, or several merged (`collect`).
fn merged_input(messages: &[InboxMessage]) -> String {
    messages
        .iter()
        .map(turn_input)
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// What the model sees for an inbox message.
fn turn_input(message: &InboxMessage) -> String {
    let mut head = format!("[message #{} from {}", message.id, message.sender);
    if message.request_id.is_some() {
        head.push_str(", reply expected: your final answer is sent back as the reply");
    }
    head.push(']');
    if message.attempts > 1 {
        head.push_str(
            "\n[an earlier attempt at this message did not finish (reef stopped or the model \
             failed); the conversation above shows what was already done. Do not repeat \
             finished actions.]",
        );
    }
    format!("{head}\n{}", message.body)
}
