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
        let _ = self.submissions.send(Submission { id: id.clone(), op });
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
        match sub.op {
            Op::UserInput { text } => {
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
                                Some(other) => queue.push_back(other),
                                // Every submitter is gone: nobody can read the answer.
                                None => break true,
                            },
                        }
                    }
                };
                if interrupted {
                    let emitter = Emitter {
                        tx: events.clone(),
                        id: sub.id,
                    };
                    session.end_turn(&emitter, TurnOutcome::Interrupted);
                }
                if let Some(id) = shutdown {
                    let _ = events.send(Event {
                        id,
                        msg: EventMsg::ShutdownComplete,
                    });
                    break;
                }
            }
            Op::Interrupt => {
                let _ = events.send(Event {
                    id: sub.id,
                    msg: EventMsg::Warning {
                        message: "no turn is running; nothing to interrupt".into(),
                    },
                });
            }
            Op::Shutdown => {
                let _ = events.send(Event {
                    id: sub.id,
                    msg: EventMsg::ShutdownComplete,
                });
                break;
            }
        }
    }
    session
}
