//! The turn loop: model → tool calls → results → model, until a final answer or a budget ends it.

use crate::debug::{StopAt, StopKind};
use crate::dispatch;
use crate::error::AgentError;
use crate::meter;
use crate::session::{Emitter, Session, TurnState};
use crate::small;
use crate::textcalls::parse_text_tool_calls;
use reef_core::{
    CompactionTrigger, Event, EventMsg, Message, ModelErrorKind, ModelRequest, ModelResponse,
    StreamEvent, SubmissionId, ToolCall, TurnOutcome,
};
use std::collections::HashMap;
use tokio::sync::mpsc::UnboundedSender;

impl Session {
    /// Runs one turn for `input` and returns how it ended. Every step is emitted as an event
    /// tagged with `submission`, ending with `TurnEnded`. Dropping the returned future cancels
    /// the turn: in-flight model requests are abandoned and tool processes are killed.
    pub async fn run_turn(
        &mut self,
        submission: SubmissionId,
        input: String,
        events: UnboundedSender<Event>,
    ) -> TurnOutcome {
        let emitter = Emitter {
            tx: events,
            id: submission,
        };
        self.turn = TurnState::default();
        self.pauses.reset();
        emitter.emit(EventMsg::TurnStarted {
            session_id: self.id.clone(),
        });
        let budget = self.opts.max_wall;
        // The wall clock stands still while the turn waits at a debugger's stop.
        let pauses = self.pauses.clone();
        let start = tokio::time::Instant::now();
        let outcome = tokio::select! {
            result = self.turn_inner(input, &emitter) => match result {
                Ok(outcome) => outcome,
                Err(err) => {
                    emitter.emit(EventMsg::Error {
                        message: err.to_string(),
                    });
                    TurnOutcome::Failed {
                        error: err.to_string(),
                    }
                }
            },
            () = pauses.expired(start, budget) => TurnOutcome::TimedOut {
                limit_secs: budget.as_secs(),
            },
        };
        self.end_turn(&emitter, outcome.clone());
        outcome
    }

    /// Emits `TurnEnded` for `outcome` with the progress of the current turn.
    pub(crate) fn end_turn(&self, emitter: &Emitter, outcome: TurnOutcome) {
        emitter.emit(EventMsg::TurnEnded {
            outcome,
            rounds: self.turn.rounds,
            usage: self.turn.usage,
        });
    }

    async fn turn_inner(
        &mut self,
        input: String,
        emitter: &Emitter,
    ) -> Result<TurnOutcome, AgentError> {
        // Skills and MCP servers are found again inside the turn's wall-clock budget.
        self.refresh_tools().await;
        self.persist(Message::user(input.clone())).await?;
        self.turn.first_seq = self.history.last().map_or(0, |h| h.first_seq);
        let max_rounds = self.opts.max_rounds;
        let mut seen: HashMap<(String, String), u32> = HashMap::new();
        while self.turn.rounds < max_rounds {
            self.turn.rounds += 1;
            if self.turn.rounds > 1 {
                self.take_steers(emitter).await?;
            }
            let request = match self.fitted_request(emitter).await? {
                Fitted::Request(request) => request,
                Fitted::Overflow { tokens, window } => {
                    self.drop_current_turn(window).await?;
                    return Ok(TurnOutcome::ContextOverflow { tokens, window });
                }
            };
            if self.stops_at(StopKind::Round) {
                // Only tool calls can be skipped or edited: every answer sends the request.
                self.pause_at(StopAt::ModelRequest, None).await;
            }
            // A required call is asked of one request only.
            self.turn.require_call = false;
            let response = match self.send(&request, emitter).await {
                Err(AgentError::Model(err)) if err.kind == ModelErrorKind::ContextLength => {
                    // The provider counts differently: its window is below this prompt.
                    // Compact to fit under it and try once more.
                    let before = self.meter.estimate(meter::request_chars(&request));
                    self.refused_at = Some(self.refused_at.map_or(before, |r| r.min(before)));
                    let compacted = self
                        .compact(CompactionTrigger::ContextLengthError, before, emitter)
                        .await?;
                    if compacted.is_none() {
                        let window = self.window().unwrap_or(before);
                        self.drop_current_turn(window).await?;
                        return Ok(TurnOutcome::ContextOverflow {
                            tokens: before,
                            window,
                        });
                    }
                    let (request, measure) = self.next_request().await;
                    match self.send(&request, emitter).await {
                        Err(AgentError::Model(err))
                            if err.kind == ModelErrorKind::ContextLength =>
                        {
                            // Still too long for the provider: leave this turn out.
                            let window = self.window().unwrap_or(measure.tokens);
                            self.drop_current_turn(window).await?;
                            return Ok(TurnOutcome::ContextOverflow {
                                tokens: measure.tokens,
                                window,
                            });
                        }
                        other => other?,
                    }
                }
                other => other?,
            };
            let used = self.turn.usage.input_tokens + self.turn.usage.output_tokens;

            let (text, calls) = self.resolve_calls(response.content, response.tool_calls, emitter);
            // A limit that ends the turn is found before the operator is asked about calls
            // that would not run.
            let limit = if calls.is_empty() {
                None
            } else {
                self.limit_reached(used, &calls, &mut seen)
            };
            // Before the calls are stored, so an edited call is stored as it runs.
            let (calls, mut skipped) = match limit {
                None => self.debug_calls(&text, calls).await,
                Some(_) => (calls, HashMap::new()),
            };
            self.persist(Message::Assistant {
                content: text.clone(),
                tool_calls: calls.clone(),
            })
            .await?;
            if !text.is_empty() {
                emitter.emit(EventMsg::AssistantMessage { text: text.clone() });
            }
            if calls.is_empty() {
                if self.send_back(&input, &text, emitter).await? {
                    continue;
                }
                return Ok(TurnOutcome::Completed { text });
            }
            if let Some(outcome) = limit {
                // The calls stay unanswered; the next context answers them with an error.
                return Ok(outcome);
            }

            let small = self.small();
            if small {
                self.guard_writes(&input, &calls, &mut skipped);
            }
            let results = dispatch::run_calls(self, &calls, &skipped, emitter).await;
            for (call, mut message) in calls.iter().zip(results) {
                // Evidence is kept for the small profile's checks only: it copies results.
                if small
                    && let Message::Tool {
                        name,
                        content,
                        is_error,
                        ..
                    } = &mut message
                {
                    self.turn
                        .evidence
                        .record(name, &call.arguments, content, *is_error);
                    // A failed call (a command too, by its exit status) gets a hint; a
                    // refused write or a call the operator skipped says why itself.
                    let failed = self.turn.evidence.last_failed;
                    if failed && !skipped.contains_key(call.id.as_str()) {
                        let hint = small::error_hint(name, content);
                        content.push('\n');
                        content.push_str(hint);
                    }
                }
                self.persist(message).await?;
            }
        }
        Ok(TurnOutcome::MaxRounds { limit: max_rounds })
    }

    /// Under the small profile, a blind write does not run (see [`small::guard`]): its call
    /// is answered with the refusal instead, once per path.
    fn guard_writes(
        &mut self,
        input: &str,
        calls: &[ToolCall],
        skipped: &mut HashMap<String, String>,
    ) {
        let files = small::Files::new(&self.opts.workspace, &self.opts.hidden);
        // Every call of the round is judged on what the turn had shown before it.
        let refused: Vec<(String, small::Refusal)> = calls
            .iter()
            .filter(|call| !skipped.contains_key(call.id.as_str()))
            .filter_map(|call| {
                small::guard(
                    &call.name,
                    &call.arguments,
                    input,
                    &self.turn.evidence,
                    files,
                )
                .map(|refusal| (call.id.as_str().to_owned(), refusal))
            })
            .collect();
        for (id, refusal) in refused {
            self.turn.evidence.refuse(refusal.path);
            skipped.insert(id, refusal.message);
        }
    }

    /// Under the small profile, an answer no tool result supports is sent back once (per
    /// reason) with a note saying why; returns whether it was. The answer and the note are
    /// kept in the transcript as they were sent.
    async fn send_back(
        &mut self,
        input: &str,
        answer: &str,
        emitter: &Emitter,
    ) -> Result<bool, AgentError> {
        // A model offered no tools (one that cannot call them) could not act on the note.
        if !self.small() || self.offered_tools().is_empty() {
            return Ok(false);
        }
        let Some((nudge, detail)) = small::review(
            input,
            answer,
            &self.turn.evidence,
            &self.turn.nudges,
            small::Files::new(&self.opts.workspace, &self.opts.hidden),
        ) else {
            return Ok(false);
        };
        self.turn.nudges.push(nudge);
        self.turn.require_call = nudge.requires_call();
        let note = nudge.message(&detail);
        emitter.emit(EventMsg::Warning {
            message: format!("the answer was sent back to the model: {note}"),
        });
        self.persist(Message::user(note)).await?;
        Ok(true)
    }

    /// The budget or loop limit this round's calls reach, which ends the turn.
    fn limit_reached(
        &self,
        used: u64,
        calls: &[ToolCall],
        seen: &mut HashMap<(String, String), u32>,
    ) -> Option<TurnOutcome> {
        if let Some(limit) = self.opts.token_budget
            && used >= limit
        {
            return Some(TurnOutcome::BudgetExceeded { limit, used });
        }
        if let Some(limit) = self.opts.cost_budget_micros
            && self.turn.cost_micros >= limit
        {
            return Some(TurnOutcome::CostExceeded {
                limit_micros: limit,
                used_micros: self.turn.cost_micros,
            });
        }
        repeated_call(seen, calls, self.opts.loop_limit)
            .map(|(tool, repeats)| TurnOutcome::LoopDetected { tool, repeats })
    }

    /// The next request, compacted first when it would pass `compact_at` of the window;
    /// `Overflow` when it cannot be made to fit.
    async fn fitted_request(&mut self, emitter: &Emitter) -> Result<Fitted, AgentError> {
        let (request, measure) = self.next_request().await;
        let Some(window) = self.window() else {
            return Ok(Fitted::Request(request));
        };
        let threshold = (window as f64 * self.opts.compact_at) as u64;
        if measure.tokens <= threshold {
            return Ok(Fitted::Request(request));
        }
        if self
            .compact(CompactionTrigger::Threshold, measure.tokens, emitter)
            .await?
            .is_none()
            && measure.tokens < window
        {
            // Nothing left to compact, but it still fits.
            return Ok(Fitted::Request(request));
        }
        let (request, measure) = self.next_request().await;
        if measure.tokens >= window {
            return Ok(Fitted::Overflow {
                tokens: measure.tokens,
                window,
            });
        }
        Ok(Fitted::Request(request))
    }

    /// Sends one request, streaming its text as events, and accounts for its usage.
    async fn send(
        &mut self,
        request: &ModelRequest,
        emitter: &Emitter,
    ) -> Result<ModelResponse, AgentError> {
        let delta_sink = emitter.clone();
        let on_event = move |event: StreamEvent<'_>| match event {
            StreamEvent::Text(text) => delta_sink.emit(EventMsg::ModelDelta {
                text: text.to_owned(),
            }),
            StreamEvent::Retrying { attempt, error } => delta_sink.emit(EventMsg::ModelRetry {
                attempt,
                error: error.to_string(),
            }),
        };
        let response = self.model.complete(request, &on_event).await?;
        self.meter
            .calibrate(meter::request_chars(request), response.usage.input_tokens);
        self.account(&response, emitter).await?;
        Ok(response)
    }

    /// Adds the steering messages that arrived since the last round as user messages.
    /// One that cannot be stored stays queued (the front end gets it back at the turn's end).
    async fn take_steers(&mut self, emitter: &Emitter) -> Result<(), AgentError> {
        loop {
            let next = crate::session::lock_steers(&self.steers).pop_front();
            let Some((steer_id, text)) = next else {
                return Ok(());
            };
            if let Err(err) = self.persist(Message::user(text.clone())).await {
                crate::session::lock_steers(&self.steers).push_front((steer_id, text));
                return Err(err);
            }
            emitter.emit(EventMsg::Steered { steer_id, text });
        }
    }

    /// Native tool calls win; without them, calls written as text (by models without native
    /// tool calling) are recovered when they name a known tool (under the small profile, the
    /// first of them only).
    fn resolve_calls(
        &self,
        content: String,
        native: Vec<ToolCall>,
        emitter: &Emitter,
    ) -> (String, Vec<ToolCall>) {
        if !native.is_empty() {
            return (content, native);
        }
        let known = |name: &str| self.tools.get(name).is_some();
        let (rest, mut calls) = parse_text_tool_calls(&content, &known);
        if calls.is_empty() {
            return (content, calls);
        }
        let written = calls.len();
        if self.small() {
            // One call per reply, as the request asked; a small model that writes a list of
            // calls as text repeats itself more often than it plans.
            calls.truncate(1);
        }
        emitter.emit(EventMsg::Warning {
            message: format!(
                "the model wrote {written} tool call(s) as text; reef parsed them and ran {}",
                calls.len()
            ),
        });
        (rest, calls)
    }
}

/// The next request, or why it cannot be sent.
enum Fitted {
    Request(ModelRequest),
    Overflow { tokens: u64, window: u64 },
}

/// Counts each call of the round under its name and normalised arguments; the first one seen
/// `limit` times in this turn is reported (never with `limit` 0).
fn repeated_call(
    seen: &mut HashMap<(String, String), u32>,
    calls: &[ToolCall],
    limit: u32,
) -> Option<(String, u32)> {
    if limit == 0 {
        return None;
    }
    let mut hit = None;
    for call in calls {
        // Parsed and re-serialised, so key order and spacing do not hide a repeat.
        let args = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| call.arguments.trim().to_owned());
        let count = seen.entry((call.name.clone(), args)).or_insert(0);
        *count += 1;
        if *count >= limit && hit.is_none() {
            hit = Some((call.name.clone(), *count));
        }
    }
    hit
}

#[cfg(test)]
mod tests {
    use super::*;
    use reef_core::ToolCallId;

    fn call(args: &str) -> ToolCall {
        ToolCall {
            id: ToolCallId::new(),
            name: "shell".into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn the_same_call_in_any_key_order_counts_as_a_repeat() {
        let mut seen = HashMap::new();
        assert_eq!(
            repeated_call(&mut seen, &[call(r#"{"a":1,"b":2}"#)], 3),
            None
        );
        assert_eq!(
            repeated_call(&mut seen, &[call(r#"{"b":2, "a":1}"#)], 3),
            None
        );
        assert_eq!(repeated_call(&mut seen, &[call(r#"{"a":2}"#)], 3), None);
        assert_eq!(
            repeated_call(&mut seen, &[call(r#"{ "a": 1, "b": 2 }"#)], 3),
            Some(("shell".into(), 3))
        );
    }

    #[test]
    fn a_limit_of_zero_never_reports() {
        let mut seen = HashMap::new();
        for _ in 0..10 {
            assert_eq!(repeated_call(&mut seen, &[call("{}")], 0), None);
        }
    }
}
