//! The protocol front: a task that owns a `Session`, takes `Submission`s and emits `Event`s.

use crate::session::{Emitter, Session};
use reef_core::{Event, EventMsg, Op, Submission, SubmissionId, TurnOutcome};
use std::collections::VecDeque;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

/// A running session. Submit operations; read events until `ShutdownComplete`.
pub struct AgentHandle {
    submissions: UnboundedSender<Submission>,
    events: UnboundedReceiver<Event>,
    task: JoinHandle<Session>,
}

/// Starts the protocol loop for `session` on the current tokio runtime.
pub fn spawn(session: Session) -> AgentHandle {
    let (sub_tx, sub_rx) = mpsc::unbounded_channel();
    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(run(session, sub_rx, ev_tx));
    AgentHandle {
        submissions: sub_tx,
        events: ev_rx,
        task,
    }
}

impl AgentHandle {
    /// Queues an operation and returns the id its events will carry.
    pub fn submit(&self, op: Op) -> SubmissionId {
        let id = SubmissionId::new();
        if self
            .submissions
            .send(Submission { id: id.clone(), op })
            .is_err()
        {
            // The loop has ended (after `Shutdown`): no event will answer this.
            tracing::debug!("a submission arrived after the session ended");
        }
        id
    }

    /// A sender for other tasks (a Ctrl-C listener sending `Op::Interrupt`).
    pub fn submitter(&self) -> UnboundedSender<Submission> {
        self.submissions.clone()
    }

    /// The next event; `None` once the session has shut down and all events were read.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// Waits for the loop to end (after `Op::Shutdown`) and gives the session back.
    pub async fn join(self) -> Option<Session> {
        drop(self.submissions);
        self.task.await.ok()
    }
}

async fn run(
    mut session: Session,
    mut subs: UnboundedReceiver<Submission>,
    events: UnboundedSender<Event>,
) -> Session {
    let mut queue: VecDeque<Submission> = VecDeque::new();
    loop {
        let sub = match queue.pop_front() {
            Some(sub) => sub,
            None => match subs.recv().await {
                Some(sub) => sub,
                None => break,
            },
        };
        let emitter = Emitter {
            tx: events.clone(),
            id: sub.id.clone(),
        };
        match sub.op {
            Op::Steer { text } => {
                // No turn to steer into: the front end decides what it becomes.
                emitter.emit(EventMsg::SteerReturned { text });
            }
            Op::UserInput { text } => {
                let steers = session.steers.clone();
                let mut shutdown = None;
                let interrupted = {
                    let turn = session.run_turn(sub.id.clone(), text, events.clone());
                    tokio::pin!(turn);
                    loop {
                        tokio::select! {
                            biased;
                            _ = &mut turn => break false,
                            next = subs.recv() => match next {
                                Some(Submission { op: Op::Interrupt, .. }) => break true,
                                Some(Submission { id, op: Op::Shutdown }) => {
                                    shutdown = Some(id);
                                    break true;
                                }
                                Some(Submission { id, op: Op::Steer { text } }) => {
                                    crate::session::lock_steers(&steers).push_back((id, text));
                                }
                                Some(other) => queue.push_back(other),
                                // Every submitter is gone: nobody can read the answer.
                                None => break true,
                            },
                        }
                    }
                };
                if interrupted {
                    session.end_turn(&emitter, TurnOutcome::Interrupted);
                }
                // Steering that found no round boundary goes back to the front end, which
                // decides whether it becomes the next input.
                let left: Vec<(SubmissionId, String)> =
                    crate::session::lock_steers(&steers).drain(..).collect();
                for (id, text) in left {
                    send(&events, id, EventMsg::SteerReturned { text });
                }
                if let Some(id) = shutdown {
                    send(&events, id, EventMsg::ShutdownComplete);
                    break;
                }
            }
            Op::Compact => {
                if let Err(err) = session.compact_now(&emitter).await {
                    emitter.emit(EventMsg::Error {
                        message: format!("compaction failed: {err}"),
                    });
                }
            }
            Op::NewSession => match session.start_new().await {
                Ok(()) => {
                    let configured = session.configured_event(sub.id);
                    send(&events, configured.id, configured.msg);
                }
                Err(err) => emitter.emit(EventMsg::Error {
                    message: format!("cannot start a new session: {err}"),
                }),
            },
            Op::SetModel { provider } => match session.switch_model(provider.as_deref()) {
                Ok(()) => emitter.emit(EventMsg::ModelChanged {
                    provider: session.model().provider().to_owned(),
                    model: session.model().model().to_owned(),
                }),
                Err(message) => emitter.emit(EventMsg::Error { message }),
            },
            Op::Configure { settings } => session.configure(settings),
            Op::Interrupt => emitter.emit(EventMsg::Warning {
                message: "no turn is running; nothing to interrupt".into(),
            }),
            Op::Shutdown => {
                send(&events, sub.id, EventMsg::ShutdownComplete);
                break;
            }
        }
    }
    session
}

/// Sends an event; a front end that went away is ignored.
fn send(events: &UnboundedSender<Event>, id: SubmissionId, msg: EventMsg) {
    if events.send(Event { id, msg }).is_err() {
        tracing::debug!("an event was not delivered: the front end is gone");
    }
}
