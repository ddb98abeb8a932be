//! Where a turn can stop for a debugger (before each model request, before each tool call),
//! what it shows there, how the operator lets it go on, and the wall clock of a turn that
//! does not run while the turn waits at a stop.

use crate::session::Session;
use async_trait::async_trait;
use reef_core::{Message, ToolCall};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// What kind of step the turn is about to take; asked before anything is built for a stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopKind<'a> {
    /// The next model request.
    Round,
    /// A tool call, by tool name.
    Tool(&'a str),
}

/// The step the turn is about to take.
#[derive(Clone, Debug, PartialEq)]
pub enum StopAt {
    ModelRequest,
    ToolCall(ToolCall),
}

/// A turn stopped before a step, with the context it would carry.
#[derive(Clone, Debug, PartialEq)]
pub struct Stop {
    /// The turn's round (1 is its first model request).
    pub round: u32,
    pub at: StopAt,
    /// The size of the context now, in tokens (exact for a model that counts its own).
    pub context_tokens: u64,
    /// The model's window, when known.
    pub window: Option<u64>,
    /// Everything the next model request carries, system prompt first.
    pub context: Vec<Message>,
}

/// How the turn goes on from a stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Take the step; a tool call runs with these arguments (a JSON object text) when the
    /// operator changed them.
    Proceed { arguments: Option<String> },
    /// Do not run the tool call: the model gets this text as the call's error result.
    Skip { error: String },
}

/// A debugger attached to a session: the extension point front ends implement to pause a
/// turn and let an operator decide.
#[async_trait]
pub trait Debugger: Send + Sync {
    /// Whether the turn stops before this step. Called before every model request and tool
    /// call, so it must be cheap.
    fn stops_at(&self, kind: StopKind<'_>) -> bool;

    /// Waits for the operator's decision at `stop`. The turn's wall-clock budget does not run
    /// meanwhile. The future is dropped when the turn is interrupted; the debugger then
    /// forgets the stop.
    async fn pause(&self, stop: Stop) -> Resume;
}

impl Session {
    /// Whether an attached debugger stops the turn before this step.
    pub(crate) fn stops_at(&self, kind: StopKind<'_>) -> bool {
        self.debugger.as_ref().is_some_and(|d| d.stops_at(kind))
    }

    /// Waits at a stop before `at` until the debugger lets the turn go on. `pending` is the
    /// model's message of this round, not stored yet (at a tool call).
    pub(crate) async fn pause_at(&self, at: StopAt, pending: Option<Message>) -> Resume {
        let Some(debugger) = self.debugger.clone() else {
            return Resume::Proceed { arguments: None };
        };
        let (mut request, mut measure) = self.next_request().await;
        if let Some(message) = pending {
            request.messages.push(message);
            measure = self.meter.measure(self.model.as_ref(), &request).await;
        }
        let stop = Stop {
            round: self.turn.rounds,
            at,
            context_tokens: measure.tokens,
            window: self.window(),
            context: request.messages,
        };
        let _paused = self.pauses.begin();
        debugger.pause(stop).await
    }

    /// Stops before each call the debugger wants, in order: returns the calls with the
    /// arguments the operator set, and the error text of each call the operator skipped
    /// (by call id).
    pub(crate) async fn debug_calls(
        &self,
        text: &str,
        mut calls: Vec<ToolCall>,
    ) -> (Vec<ToolCall>, HashMap<String, String>) {
        let mut skipped = HashMap::new();
        for i in 0..calls.len() {
            if !self.stops_at(StopKind::Tool(&calls[i].name)) {
                continue;
            }
            // The context shows the round's calls as they stand (earlier edits included).
            let pending = Message::Assistant {
                content: text.to_owned(),
                tool_calls: calls.clone(),
            };
            let at = StopAt::ToolCall(calls[i].clone());
            match self.pause_at(at, Some(pending)).await {
                Resume::Proceed { arguments: None } => {}
                Resume::Proceed {
                    arguments: Some(arguments),
                } => calls[i].arguments = arguments,
                Resume::Skip { error } => {
                    skipped.insert(calls[i].id.as_str().to_owned(), error);
                }
            }
        }
        (calls, skipped)
    }
}

/// Time a turn spent waiting at stops, which its wall-clock budget does not count.
#[derive(Clone, Debug, Default)]
pub(crate) struct PauseClock(Arc<Mutex<Paused>>);

#[derive(Debug, Default)]
struct Paused {
    total: Duration,
    since: Option<Instant>,
}

impl PauseClock {
    fn lock(&self) -> MutexGuard<'_, Paused> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a pause; it ends when the guard is dropped.
    pub(crate) fn begin(&self) -> PauseGuard {
        self.lock().since = Some(Instant::now());
        PauseGuard(self.clone())
    }

    /// Forgets earlier turns' pauses.
    pub(crate) fn reset(&self) {
        *self.lock() = Paused::default();
    }

    /// Time paused so far, and whether a pause is going on.
    fn paused(&self) -> (Duration, bool) {
        let state = self.lock();
        let now = state.since.map_or(Duration::ZERO, |s| s.elapsed());
        (state.total + now, state.since.is_some())
    }

    /// Completes once `budget` has passed since `start`, not counting pauses; never when the
    /// deadline is beyond what the clock can represent.
    pub(crate) async fn expired(&self, start: Instant, budget: Duration) {
        loop {
            let (paused, pausing) = self.paused();
            let Some(deadline) = budget
                .checked_add(paused)
                .and_then(|wait| start.checked_add(wait))
            else {
                return std::future::pending().await;
            };
            let now = Instant::now();
            if !pausing && now >= deadline {
                return;
            }
            // While paused the deadline moves: look again later.
            let wake = if pausing {
                deadline.max(now.checked_add(Duration::from_secs(1)).unwrap_or(deadline))
            } else {
                deadline
            };
            tokio::time::sleep_until(wake).await;
        }
    }
}

/// An ongoing pause; dropping it ends the pause.
pub(crate) struct PauseGuard(PauseClock);

impl Drop for PauseGuard {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        if let Some(since) = state.since.take() {
            state.total += since.elapsed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_pause_moves_the_deadline_by_its_length() {
        let clock = PauseClock::default();
        let start = Instant::now();
        let budget = Duration::from_secs(10);
        tokio::time::advance(Duration::from_secs(4)).await;
        let guard = clock.begin();
        tokio::time::advance(Duration::from_secs(100)).await;
        drop(guard);
        let (paused, pausing) = clock.paused();
        assert_eq!(paused, Duration::from_secs(100));
        assert!(!pausing);
        clock.expired(start, budget).await;
        assert_eq!(Instant::now() - start, Duration::from_secs(110));
    }

    #[tokio::test(start_paused = true)]
    async fn a_turn_never_expires_while_it_waits_at_a_stop() {
        let clock = PauseClock::default();
        let start = Instant::now();
        let guard = clock.begin();
        let expired = clock.expired(start, Duration::from_secs(1));
        tokio::pin!(expired);
        let waited = tokio::time::timeout(Duration::from_secs(3600), &mut expired).await;
        assert!(waited.is_err(), "the budget ran out during a pause");
        drop(guard);
        expired.await;
        assert_eq!(Instant::now() - start, Duration::from_secs(3601));
    }
}
