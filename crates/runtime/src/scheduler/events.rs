//! Event triggers: routines that fire when an event of their kind, whose text matches their
//! pattern, is committed to the history. The listener reads the history from where it left
//! off (so a burst is not missed; the position is kept in the store across restarts), fires
//! each match once under the key `event:SEQ`, and holds a routine back during its `cooldown`
//! (at least `scheduler.min_interval`). What routines cause never triggers one, and an agent's
//! routine sees only its own and its children's events.

use super::plan::{Fire, rfc3339};
use crate::error::RuntimeError;
use crate::kernel::Runtime;
use chrono::{DateTime, Utc};
use reef_core::Trigger;
use reef_store::{RoutineRecord, StoredEvent};

/// Events read from the history per query.
const BATCH: usize = 512;
/// The most of an event's text a routine's message quotes.
const EVENT_TEXT: usize = 500;

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

pub(super) struct Listener {
    after: u64,
    routines: Vec<(RoutineRecord, Option<regex::Regex>)>,
}

/// Whether a live event should wake the scheduler: a run ended (a queued run may start), or,
/// while an event routine listens, anything it could be waiting for. Without event routines
/// the agents' busy traffic costs the scheduler nothing.
pub(super) fn wakes(event: &StoredEvent, listening: bool) -> bool {
    event.kind == "job.ended" || (listening && event.kind != "routine.fired")
}

/// Whether an event changed a routine behind the scheduler's back (a run's failure
/// disabled it; in a cluster, any change made through another node), so the routines must
/// be read again.
pub(super) fn changes_routines(event: &StoredEvent) -> bool {
    matches!(
        event.kind.as_str(),
        "routine.created"
            | "routine.disabled"
            | "routine.enabled"
            | "routine.updated"
            | "routine.deleted"
    )
}

impl Listener {
    pub(super) fn new(after: u64) -> Listener {
        Listener {
            after,
            routines: Vec::new(),
        }
    }

    /// Reads every event routine again.
    pub(super) async fn load(&mut self, rt: &Runtime) -> Result<(), RuntimeError> {
        self.routines = Vec::new();
        for record in rt.store().list_routines().await? {
            self.add(record);
        }
        Ok(())
    }

    /// Replaces what is known of routine `name` with `record` (`None`: it is gone).
    pub(super) fn refresh(&mut self, name: &str, record: Option<RoutineRecord>) {
        self.routines.retain(|(r, _)| r.name != name);
        if let Some(record) = record {
            self.add(record);
        }
    }

    fn add(&mut self, record: RoutineRecord) {
        let (true, Trigger::Event { pattern, .. }) = (record.enabled, &record.spec.trigger) else {
            return;
        };
        match pattern.as_deref().map(regex::Regex::new).transpose() {
            Ok(regex) => self.routines.push((record, regex)),
            Err(err) => {
                tracing::warn!(routine = %record.name, error = %err, "an event routine's pattern does not compile");
            }
        }
    }

    /// Fires every event routine for the events committed since the last look, up to the
    /// history's end when the pass began (what these fires commit is for the next pass), and
    /// records how far it read so a restart goes on from there.
    pub(super) async fn fire(
        &mut self,
        rt: &Runtime,
        now: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        let end = rt.store().last_event_seq().await?;
        if self.routines.is_empty() {
            // Nothing listens: skip what happened meanwhile.
            return self.advance(rt, end).await;
        }
        let mut scope = None;
        while self.after < end {
            let mut events = rt.store().events_after(self.after, None, BATCH).await?;
            events.retain(|e| e.seq <= end);
            let Some(last) = events.last().map(|e| e.seq) else {
                break;
            };
            for event in &events {
                self.dispatch(rt, event, now, &mut scope).await?;
            }
            self.advance(rt, last).await?;
        }
        Ok(())
    }

    /// Moves the read position to `seq`; it is written to the store only while event routines
    /// listen (a restart then goes on from it; with none listening, there is nothing to miss).
    async fn advance(&mut self, rt: &Runtime, seq: u64) -> Result<(), RuntimeError> {
        if seq != self.after {
            self.after = seq;
            if self.listening() {
                rt.store().set_scheduler_cursor(seq).await?;
            }
        }
        Ok(())
    }

    /// Whether any event routine listens.
    pub(super) fn listening(&self) -> bool {
        !self.routines.is_empty()
    }

    async fn dispatch(
        &mut self,
        rt: &Runtime,
        event: &StoredEvent,
        now: DateTime<Utc>,
        scope: &mut Option<Vec<reef_store::AgentRecord>>,
    ) -> Result<(), RuntimeError> {
        // What routines themselves cause (their messages, fires, runs' reports) never
        // triggers a routine: no routine can feed itself or another in a loop that way.
        let from = event.data["from"].as_str().unwrap_or_default();
        if from.starts_with("routine:")
            || from.starts_with("heartbeat")
            || event.kind.starts_with("routine.")
        {
            return Ok(());
        }
        let text = event.data.to_string();
        for (record, regex) in &mut self.routines {
            let Trigger::Event { event: kind, .. } = &record.spec.trigger else {
                continue;
            };
            // An agent's routine sees only its own and its children's events, and never the
            // operator's terminal sessions (what was typed in its sandbox is not its to read).
            if let (Some(owner), reef_store::RoutineSource::Agent) = (&record.owner, record.source)
            {
                if event.kind.starts_with("terminal.") {
                    continue;
                }
                let agents = match scope {
                    Some(agents) => agents,
                    None => scope.insert(rt.store().list_agents().await?),
                };
                let visible = event.agent_id.as_ref().is_some_and(|id| {
                    id == owner
                        || agents
                            .iter()
                            .any(|a| &a.id == id && a.parent.as_ref() == Some(owner))
                });
                if !visible {
                    continue;
                }
            }
            let own = event.data["routine"].as_str() == Some(record.name.as_str());
            let kind_matches = match kind.strip_suffix('*') {
                Some(prefix) => event.kind.starts_with(prefix),
                None => event.kind == *kind,
            };
            if own || !kind_matches || regex.as_ref().is_some_and(|r| !r.is_match(&text)) {
                continue;
            }
            let cooldown_ms = i64::try_from(record.spec.guardrails.cooldown_secs)
                .unwrap_or(i64::MAX / 1000)
                .saturating_mul(1000);
            if record
                .last_run_ms
                .is_some_and(|last| now.timestamp_millis() < last.saturating_add(cooldown_ms))
            {
                tracing::debug!(routine = %record.name, seq = event.seq, "cooling down; event passed over");
                continue;
            }
            let fire = Fire {
                key: format!("event:{}", event.seq),
                at: now,
                cause: format!(
                    "event {} #{} at {}: {}",
                    event.kind,
                    event.seq,
                    rfc3339(now),
                    clip(&text, EVENT_TEXT)
                ),
                timed: false,
            };
            if let reef_store::Claimed::Job { .. } = super::fire_now(rt, record, fire).await? {
                record.last_run_ms = Some(now.timestamp_millis());
            }
        }
        Ok(())
    }
}
