//! One worker task per agent with work: it wakes when a message arrives, and while the agent
//! is running and its inbox is not empty it claims the oldest message, runs one turn for it
//! (holding one of the daemon's turn slots), records what happened as events, and finishes
//! the message. Budgets are checked before every turn and enforced inside it.

use crate::error::RuntimeError;
use crate::gate::ApprovalGate;
use crate::kernel::{Inner, Runtime, lock};
use crate::tools::{AgentCtx, Current, Kind, RuntimeTool};
use reef_agent::{Session, SessionOptions, ToolRegistry};
use reef_core::{AgentId, AgentState, EventMsg, ModelClient, SubmissionId, TurnOutcome};
use reef_store::{AgentRecord, InboxMessage};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// Characters of a tool output kept in a `tool.result` event.
const EVENT_OUTPUT_CHARS: usize = 2000;

/// Attempts at a message whose turn failed (model unreachable after its own retries, store
/// error) before it is given up; between attempts the agent waits 1, 2, 4, … s (at most 60).
const MAX_ATTEMPTS: u32 = 5;

/// Wait before trying again after the store failed (busy, disk full).
const STORE_RETRY: Duration = Duration::from_secs(1);

pub(crate) struct WorkerHandle {
    pub wake: Arc<Notify>,
    stop: watch::Sender<bool>,
    refresh: Arc<AtomicBool>,
    pub task: JoinHandle<()>,
}

impl WorkerHandle {
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    pub fn refresh(&self) {
        self.refresh.store(true, Ordering::SeqCst);
    }
}

pub(crate) fn start(inner: Weak<Inner>, agent: AgentId) -> WorkerHandle {
    let wake = Arc::new(Notify::new());
    let (stop, stop_rx) = watch::channel(false);
    let refresh = Arc::new(AtomicBool::new(false));
    let worker = Worker {
        ctx: Arc::new(AgentCtx {
            runtime: inner.clone(),
            agent: agent.clone(),
            current: Mutex::new(None),
        }),
        inner,
        agent,
        session: None,
        refresh: refresh.clone(),
    };
    let task = tokio::spawn(run(worker, wake.clone(), stop_rx));
    WorkerHandle {
        wake,
        stop,
        refresh,
        task,
    }
}

struct Worker {
    inner: Weak<Inner>,
    agent: AgentId,
    ctx: Arc<AgentCtx>,
    session: Option<Session>,
    refresh: Arc<AtomicBool>,
}

enum Next {
    Idle,
    /// A turn failed and its message went back to the inbox: wait before the next attempt.
    Backoff(Duration),
    Stop,
}

async fn run(mut worker: Worker, wake: Arc<Notify>, mut stop: watch::Receiver<bool>) {
    loop {
        match worker.drain(&mut stop).await {
            Next::Stop => return,
            Next::Backoff(delay) => {
                tokio::select! {
                    () = tokio::time::sleep(delay) => continue,
                    _ = stop.changed() => return,
                }
            }
            Next::Idle => {}
        }
        tokio::select! {
            () = wake.notified() => {}
            _ = stop.changed() => return,
        }
    }
}

impl Worker {
    /// Runs turns until the inbox is empty or the agent is no longer running.
    async fn drain(&mut self, stop: &mut watch::Receiver<bool>) -> Next {
        loop {
            if *stop.borrow() {
                return Next::Stop;
            }
            let Ok(rt) = Runtime::from_weak(&self.inner) else {
                return Next::Stop;
            };
            let record = match rt.store().get_agent(&self.agent).await {
                Ok(Some(record)) => record,
                Ok(None) => return Next::Stop,
                Err(err) => {
                    tracing::warn!(agent = %self.agent, error = %err, "cannot read the agent");
                    return Next::Backoff(STORE_RETRY);
                }
            };
            if record.state != AgentState::Running {
                return Next::Idle;
            }
            let remaining = match remaining(&rt, &record).await {
                Ok(remaining) => remaining,
                Err(err) => {
                    tracing::warn!(agent = %record.name, error = %err, "cannot read usage");
                    return Next::Backoff(STORE_RETRY);
                }
            };
            if let Some((kind, reason)) = remaining.exhausted(&record) {
                stop_for_budget(&rt, &record, &reason, kind).await;
                return Next::Idle;
            }
            let turns = rt.inner.turns.clone();
            let permit = tokio::select! {
                permit = turns.acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => return Next::Stop,
                },
                _ = stop.changed() => return Next::Stop,
            };
            let message = match rt.store().claim_next(&record.id).await {
                Ok(Some(message)) => message,
                Ok(None) => return Next::Idle,
                Err(err) => {
                    tracing::warn!(agent = %record.name, error = %err, "cannot claim a message");
                    return Next::Backoff(STORE_RETRY);
                }
            };
            rt.bus().poke();
            let next = self.process(&rt, &record, message, remaining, stop).await;
            drop(permit);
            if !matches!(next, Next::Idle) {
                return next;
            }
        }
    }

    async fn process(
        &mut self,
        rt: &Runtime,
        record: &AgentRecord,
        message: InboxMessage,
        remaining: Remaining,
        stop: &mut watch::Receiver<bool>,
    ) -> Next {
        let store = rt.store().clone();
        if let Err(err) = self.prepare(rt, record, remaining).await {
            let _ = store.release_message(message.id).await;
            if let RuntimeError::Store(_) = err {
                // Transient: the message waits and the worker tries again shortly.
                tracing::warn!(agent = %record.name, error = %err, "cannot prepare a turn");
                return Next::Backoff(STORE_RETRY);
            }
            // The agent cannot run (a model removed from config, …): the message waits.
            let reason = format!("cannot start a turn: {err}");
            let _ = store
                .transition_agent(&record.id, AgentState::Failed, &reason)
                .await;
            tell_parent(
                rt,
                record,
                &format!("Agent {} failed: {reason}", record.name),
                message.id,
            )
            .await;
            rt.bus().poke();
            return Next::Idle;
        }
        let Some(session) = self.session.as_mut() else {
            return Next::Idle;
        };
        *lock(&self.ctx.current) = Some(Current {
            inbox_id: message.id,
            request_id: message.request_id.clone(),
            actions: std::collections::HashMap::new(),
            questions: Vec::new(),
        });
        let _ = store
            .append_event(
                "turn.started",
                Some(&record.id),
                json!({"inbox_id": message.id, "from": message.sender,
                       "attempt": message.attempts, "session": session.id()}),
            )
            .await;
        if let Some(warning) = rt.sandbox_warning() {
            // Tools run unconfined: say so on every turn, where the operator watches.
            let _ = store
                .append_event(
                    "agent.warning",
                    Some(&record.id),
                    json!({"message": warning}),
                )
                .await;
        }
        rt.bus().poke();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let forwarder = tokio::spawn(forward(rt.clone(), record.id.clone(), message.id, rx));
        let input = turn_input(&message);
        let outcome = {
            let turn = session.run_turn(SubmissionId::new(), input, tx);
            tokio::select! {
                outcome = turn => Some(outcome),
                _ = stop.changed() => None,
            }
        };
        let _ = forwarder.await;
        let asked = lock(&self.ctx.current)
            .take()
            .and_then(|c| c.questions.last().cloned());
        let Some(outcome) = outcome else {
            // Shutdown or stop: the message goes back to the inbox and runs again later.
            let _ = store.release_message(message.id).await;
            let _ = store
                .append_event(
                    "turn.interrupted",
                    Some(&record.id),
                    json!({"inbox_id": message.id}),
                )
                .await;
            rt.bus().poke();
            return Next::Stop;
        };
        if let TurnOutcome::Failed { error } = &outcome
            && message.attempts < MAX_ATTEMPTS
        {
            // Not this message's fault: it goes back to the inbox and is tried again later.
            let delay = Duration::from_secs((1u64 << (message.attempts.saturating_sub(1))).min(60));
            let _ = store.release_message(message.id).await;
            let _ = store
                .append_event(
                    "turn.retry_scheduled",
                    Some(&record.id),
                    json!({"inbox_id": message.id, "attempt": message.attempts,
                           "error": error, "delay_secs": delay.as_secs()}),
                )
                .await;
            rt.bus().poke();
            return Next::Backoff(delay);
        }
        finish(rt, record, &message, outcome, asked).await;
        Next::Idle
    }

    /// Builds the session on first use (resuming the agent's transcript), and brings the
    /// model, persona and budget up to date before every turn.
    async fn prepare(
        &mut self,
        rt: &Runtime,
        record: &AgentRecord,
        remaining: Remaining,
    ) -> Result<(), RuntimeError> {
        let opts = session_options(rt, record, remaining);
        let refresh = self.refresh.swap(false, Ordering::SeqCst);
        if let Some(session) = self.session.as_mut() {
            if refresh {
                session.set_model(model_for(rt, record.model.as_deref())?);
            }
            session.set_options(opts);
            return Ok(());
        }
        let model = model_for(rt, record.model.as_deref())?;
        let tools = Arc::new(registry_for(rt, record, Some(self.ctx.clone()))?);
        let store = rt.store().clone();
        let session = match &record.session {
            Some(id) => Session::resume(id.clone(), model, tools, store, opts).await,
            None => {
                let session = Session::create(model, tools, store, opts).await;
                if let Ok(session) = &session {
                    rt.store()
                        .set_agent_session(&record.id, session.id())
                        .await?;
                }
                session
            }
        }
        .map_err(|e| RuntimeError::Setup(e.to_string()))?;
        self.session = Some(session);
        Ok(())
    }
}

/// Records how the turn ended and finishes the message; a request gets the final text as
/// its reply in the same transaction — unless the turn asked the operator something and
/// completed, in which case the reply waits for the answer (`asked`). Budgets that ran out
/// stop the agent and tell its parent.
async fn finish(
    rt: &Runtime,
    record: &AgentRecord,
    message: &InboxMessage,
    outcome: TurnOutcome,
    asked: Option<String>,
) {
    let store = rt.store();
    if let (Some(_), Some(question), TurnOutcome::Completed { .. }) =
        (&message.request_id, &asked, &outcome)
    {
        // The question carries the request: the turn that reads its answer replies.
        tracing::debug!(agent = %record.name, %question, "reply deferred to a question");
        if let Err(err) = store.complete_message(message.id, None).await {
            tracing::warn!(agent = %record.name, error = %err, "cannot finish an inbox message");
        }
        rt.bus().poke();
        return;
    }
    let finished = match &outcome {
        TurnOutcome::Completed { text } => {
            let answer = if text.trim().is_empty() {
                "(finished without a text answer)".to_owned()
            } else {
                text.clone()
            };
            store.complete_message(message.id, Some(answer)).await
        }
        // No answer: a request on the message is cancelled with the reason.
        other => {
            let reason = format!("{} {}", record.name, describe(other));
            store.abandon_message(message.id, &reason).await
        }
    };
    match finished {
        Ok(Some(asker)) => rt.wake(&asker),
        Ok(None) => {}
        Err(err) => {
            tracing::warn!(agent = %record.name, error = %err, "cannot finish an inbox message");
        }
    }
    let budget = match &outcome {
        TurnOutcome::MaxRounds { .. } => Some("rounds"),
        TurnOutcome::TimedOut { .. } => Some("wall_secs"),
        TurnOutcome::BudgetExceeded { .. } => Some("tokens"),
        TurnOutcome::CostExceeded { .. } => Some("cost_micros"),
        _ => None,
    };
    if let Some(kind) = budget {
        stop_for_budget(rt, record, &describe(&outcome), kind).await;
    } else if let TurnOutcome::LoopDetected { tool, repeats } = &outcome {
        let _ = store
            .append_event(
                "agent.loop_detected",
                Some(&record.id),
                json!({"tool": tool, "repeats": repeats, "inbox_id": message.id}),
            )
            .await;
        tell_parent(
            rt,
            record,
            &format!(
                "Agent {} was stopped mid-turn: it called `{tool}` {repeats} times with the same \
                 arguments. Its message #{} was set aside.",
                record.name, message.id
            ),
            message.id,
        )
        .await;
    } else if let TurnOutcome::Failed { error } = &outcome {
        tell_parent(
            rt,
            record,
            &format!("Agent {}'s turn failed: {error}", record.name),
            message.id,
        )
        .await;
    }
    rt.bus().poke();
}

/// Fails the agent because a budget ran out, records `budget.exceeded`, tells the parent.
async fn stop_for_budget(rt: &Runtime, record: &AgentRecord, reason: &str, kind: &str) {
    let store = rt.store();
    let _ = store
        .append_event(
            "budget.exceeded",
            Some(&record.id),
            json!({"budget": kind, "reason": reason}),
        )
        .await;
    let _ = store
        .transition_agent(
            &record.id,
            AgentState::Failed,
            &format!("budget exceeded: {reason}"),
        )
        .await;
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

fn describe(outcome: &TurnOutcome) -> String {
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
        TurnOutcome::Interrupted => "interrupted".into(),
        TurnOutcome::Failed { error } => format!("failed: {error}"),
    }
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

/// Records the turn's progress as events on the bus.
async fn forward(
    rt: Runtime,
    agent: AgentId,
    inbox_id: u64,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<reef_core::Event>,
) {
    while let Some(event) = rx.recv().await {
        let (kind, data) = match event.msg {
            EventMsg::ToolCallBegin {
                call_id,
                name,
                arguments,
            } => (
                "tool.call",
                json!({"call_id": call_id, "name": name, "arguments": arguments}),
            ),
            EventMsg::ToolCallEnd {
                call_id,
                name,
                output,
                is_error,
                saved_to,
            } => (
                "tool.result",
                json!({"call_id": call_id, "name": name, "is_error": is_error,
                       "output": output.chars().take(EVENT_OUTPUT_CHARS).collect::<String>(),
                       "saved_to": saved_to}),
            ),
            EventMsg::AssistantMessage { text } => ("agent.message", json!({"text": text})),
            EventMsg::Usage {
                provider,
                model,
                usage,
                cost_micros,
            } => (
                "model.usage",
                json!({"provider": provider, "model": model, "usage": usage,
                       "cost_micros": cost_micros}),
            ),
            EventMsg::ModelRetry { attempt, error } => {
                ("model.retry", json!({"attempt": attempt, "error": error}))
            }
            EventMsg::Warning { message } => ("agent.warning", json!({"message": message})),
            EventMsg::Error { message } => ("agent.error", json!({"message": message})),
            EventMsg::TurnEnded {
                outcome,
                rounds,
                usage,
            } => (
                "turn.ended",
                json!({"inbox_id": inbox_id, "outcome": outcome, "rounds": rounds,
                       "usage": usage}),
            ),
            EventMsg::SessionConfigured { .. }
            | EventMsg::TurnStarted { .. }
            | EventMsg::ModelDelta { .. }
            | EventMsg::ShutdownComplete => continue,
        };
        if let Err(err) = rt.store().append_event(kind, Some(&agent), data).await {
            tracing::warn!(error = %err, "cannot record an event");
        }
        rt.bus().poke();
    }
}

/// What the agent may still spend over its life: tokens and millionths of a US dollar;
/// `None` where its budget has no such limit.
#[derive(Clone, Copy, Debug, Default)]
struct Remaining {
    tokens: Option<u64>,
    cost_micros: Option<u64>,
    used_tokens: u64,
    used_micros: u64,
}

impl Remaining {
    /// Which budget is spent, with the reason to record.
    fn exhausted(&self, record: &AgentRecord) -> Option<(&'static str, String)> {
        if self.tokens == Some(0) {
            return Some((
                "tokens",
                format!(
                    "token budget exhausted ({} of {} tokens used)",
                    self.used_tokens,
                    record.budget.tokens.unwrap_or(0)
                ),
            ));
        }
        if self.cost_micros == Some(0) {
            return Some((
                "cost_micros",
                format!(
                    "cost budget exhausted (${:.6} of ${:.6} spent)",
                    self.used_micros as f64 / 1e6,
                    record.budget.cost_micros.unwrap_or(0) as f64 / 1e6
                ),
            ));
        }
        None
    }
}

async fn remaining(rt: &Runtime, record: &AgentRecord) -> Result<Remaining, RuntimeError> {
    if record.budget.tokens.is_none() && record.budget.cost_micros.is_none() {
        return Ok(Remaining::default());
    }
    let (used, used_micros) = rt.store().agent_usage(&record.id).await?;
    let used_tokens = used.input_tokens + used.output_tokens;
    Ok(Remaining {
        tokens: record.budget.tokens.map(|l| l.saturating_sub(used_tokens)),
        cost_micros: record
            .budget
            .cost_micros
            .map(|l| l.saturating_sub(used_micros)),
        used_tokens,
        used_micros,
    })
}

fn session_options(rt: &Runtime, record: &AgentRecord, remaining: Remaining) -> SessionOptions {
    let config = rt.config();
    let mut opts = reef_agent::session_options(config, record.workspace.clone().into());
    opts.agent = record.name.clone();
    if let Some(rounds) = record.budget.rounds {
        opts.max_rounds = rounds.max(1);
    }
    if let Some(secs) = record.budget.wall_secs {
        opts.max_wall = Duration::from_secs(secs.max(1));
    }
    opts.token_budget = remaining.tokens;
    opts.cost_budget_micros = remaining.cost_micros;
    opts.persona = Some(format!(
        "You are `{name}`, a long-lived agent in reef (template `{template}`).\n{persona}\n\n\
         Each user message comes from your inbox, headed with its sender and number. Your final \
         text ends the turn; when the message expects a reply, that text is sent back to the \
         sender. Use message_agent to talk to other agents and ask_operator for decisions that \
         belong to the operator.",
        name = record.name,
        template = record.template,
        persona = record.persona.trim(),
    ));
    opts
}

/// The model client for a provider name (`None` = the default provider), shared per name.
pub(crate) fn model_for(
    rt: &Runtime,
    name: Option<&str>,
) -> Result<Arc<dyn ModelClient>, RuntimeError> {
    if let Some(model) = &rt.inner.model_override {
        return Ok(model.clone());
    }
    let config = rt.config();
    let mut models = lock(&rt.inner.models);
    // "" caches the default: one provider or the failover chain of `[model] default`.
    let key = name.unwrap_or("");
    if let Some(model) = models.get(key) {
        return Ok(model.clone());
    }
    let model = match name {
        Some(name) => {
            let provider = config.providers.get(name).ok_or_else(|| {
                RuntimeError::Setup(format!("model `{name}` is not a configured provider"))
            })?;
            reef_agent::model_client(provider)
        }
        None => reef_agent::default_model(config),
    }
    .map_err(|e| RuntimeError::Setup(e.to_string()))?;
    models.insert(key.to_owned(), model.clone());
    Ok(model)
}

/// The agent's tools: the built-ins in a sandbox shaped by its template, narrowed to its
/// capabilities. With `ctx` (a worker's), the runtime tools are added and `shell` is put
/// behind the approval gate.
pub(crate) fn registry_for(
    rt: &Runtime,
    record: &AgentRecord,
    ctx: Option<Arc<AgentCtx>>,
) -> Result<ToolRegistry, RuntimeError> {
    let mut config = rt.config().clone();
    if let Some(template) = rt.templates().get(&record.template) {
        config.sandbox = template.sandbox.apply(&config.sandbox);
    }
    let mut policy = reef_agent::policy_from_config(&config, rt.inner.policy.helper.clone());
    // The self-test ran once at start; a fallback applies to every agent.
    policy.backend = rt.inner.policy.backend;
    let mut registry = reef_agent::builtin_registry(&config, policy);
    if let Some(ctx) = ctx {
        if let Some(shell) = registry.get("shell") {
            registry.register(Arc::new(ApprovalGate {
                inner: shell,
                rules: rt.inner.rules.clone(),
                ctx: ctx.clone(),
            }));
        }
        let manager: &[Kind] = if record.capabilities.spawn {
            &Kind::MANAGER
        } else {
            &[]
        };
        for kind in Kind::COMMON.iter().chain(manager) {
            registry.register(Arc::new(RuntimeTool {
                kind: *kind,
                ctx: ctx.clone(),
            }));
        }
    }
    reef_agent::add_memory_tools(
        &mut registry,
        rt.inner.memory.clone(),
        &record.name,
        record.capabilities.shared_memory_write,
    );
    registry.retain(|name| record.capabilities.allows_tool(name));
    Ok(registry)
}
