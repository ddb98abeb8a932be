//! The scheduler: one task that fires routines exactly once. It keeps the next due instant of
//! every enabled timed routine in memory, sleeps on the [`Clock`] until the earliest (no
//! polling), and wakes early when a routine changes, a run ends, or an event arrives that an
//! event routine listens for. Each due fire is claimed in the store together with its effect
//! (`plan`), spawned runs are started and timed out (`runs`), and everything it decides is
//! read back from the store after a restart: the watermark of each routine says which timed
//! fires are settled, and the fires table refuses a second claim of the same identity.

mod events;
pub(crate) mod heartbeat;
mod index;
pub(crate) mod plan;
mod runs;

use crate::error::RuntimeError;
use crate::kernel::{Inner, Runtime};
use chrono::{DateTime, Utc};
use index::Index;
pub(crate) use index::from_ms;
use plan::Fire;
use reef_schedule::Clock;
use reef_store::{Claimed, FireEffect, RoutineRecord};
use std::sync::Arc;
use std::sync::Weak;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// Fires of one routine listed in one pass at most (the newest; older ones are passed over).
const LIST_CAP: usize = 10_000;
/// How long the scheduler sleeps when nothing is due (it wakes on any change).
const IDLE: chrono::Duration = chrono::Duration::days(1);

/// The runtime's handle on its scheduler.
pub(crate) struct Handle {
    pub clock: Arc<dyn Clock>,
    wake: Arc<Notify>,
    /// Read every routine again.
    dirty: AtomicBool,
    /// Routines (by name) to read again.
    touched: std::sync::Mutex<Vec<String>>,
}

impl Handle {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Handle {
        Handle {
            clock,
            wake: Arc::new(Notify::new()),
            dirty: AtomicBool::new(true),
            touched: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Routine `name` was created, changed, enabled, disabled or deleted: read it again.
    pub(crate) fn changed_routine(&self, name: &str) {
        crate::kernel::lock(&self.touched).push(name.to_owned());
        self.clock.waking();
        self.wake.notify_one();
    }

    /// Routines changed that cannot be named (a reconciliation, an agent's deleted with it):
    /// read them all again.
    pub(crate) fn changed(&self) {
        self.dirty.store(true, Ordering::SeqCst);
        self.clock.waking();
        self.wake.notify_one();
    }

    /// Something finished (a run) or arrived: look again.
    pub(crate) fn poke(&self) {
        self.clock.waking();
        self.wake.notify_one();
    }
}

struct State {
    /// When this scheduler started: timed fires at or before it were missed.
    started: Option<DateTime<Utc>>,
    index: Option<Index>,
    events: events::Listener,
}

pub(crate) async fn run(inner: Weak<Inner>, after_seq: u64) {
    let mut state = State {
        started: None,
        index: None,
        events: events::Listener::new(after_seq),
    };
    let Ok(rt) = Runtime::from_weak(&inner) else {
        return;
    };
    let mut bus = rt.bus().subscribe();
    drop(rt);
    loop {
        let Ok(rt) = Runtime::from_weak(&inner) else {
            return;
        };
        let handle = &rt.inner.scheduler;
        let clock = handle.clock.clone();
        let wake = handle.wake.clone();
        let deadline = match state.pass(&rt).await {
            Ok(deadline) => deadline,
            Err(err) => {
                tracing::warn!(error = %err, "the scheduler failed a pass; trying again in a second");
                state.index = None;
                clock.now() + chrono::Duration::seconds(1)
            }
        };
        drop(rt);
        let listening = state.events.listening();
        let sleep = clock.sleep_until(deadline);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => break,
                () = wake.notified() => break,
                event = bus.recv() => match event {
                    Ok(event) if events::changes_routines(&event) => {
                        if let (Ok(rt), Some(name)) = (Runtime::from_weak(&inner), event.data["routine"].as_str()) {
                            rt.inner.scheduler.changed_routine(name);
                        }
                        break;
                    }
                    Ok(event) if event.kind == "heartbeat.alert" => {
                        // The answer waits in the parent's inbox: wake it.
                        if let (Ok(rt), Some(to)) = (Runtime::from_weak(&inner), event.data["to"].as_str())
                            && let Ok(parent) = rt.get_agent(to).await
                        {
                            rt.wake(&parent.id);
                        }
                    }
                    Ok(event) if events::wakes(&event, listening) => break,
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        // A routine's change may be among what was missed.
                        if let Ok(rt) = Runtime::from_weak(&inner) {
                            rt.inner.scheduler.changed();
                        }
                        break;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    }
}

impl State {
    /// Claims every due fire, starts and times out runs, and returns when to look next.
    async fn pass(&mut self, rt: &Runtime) -> Result<DateTime<Utc>, RuntimeError> {
        let handle = &rt.inner.scheduler;
        let now = handle.clock.now();
        let started = *self.started.get_or_insert(now);
        let touched = std::mem::take(&mut *crate::kernel::lock(&handle.touched));
        if handle.dirty.swap(false, Ordering::SeqCst) || self.index.is_none() {
            self.index = Some(Index::load(rt, now.timestamp_millis()).await?);
            self.events.load(rt).await?;
        } else {
            for name in touched {
                let record = rt.store().routine_by_name(&name).await?;
                if let Some(index) = self.index.as_mut() {
                    index.refresh(&name, record.clone(), now.timestamp_millis());
                }
                self.events.refresh(&name, record);
            }
        }
        self.fire_timed(rt, now, started).await?;
        self.events.fire(rt, now).await?;
        let run_deadline = runs::advance(rt, now).await?;
        let next = self.index.as_ref().and_then(Index::next);
        let mut deadline = now + IDLE;
        for t in [next, run_deadline].into_iter().flatten() {
            deadline = deadline.min(t);
        }
        Ok(deadline)
    }

    async fn fire_timed(
        &mut self,
        rt: &Runtime,
        now: DateTime<Utc>,
        started: DateTime<Utc>,
    ) -> Result<(), RuntimeError> {
        let Some(index) = self.index.as_mut() else {
            return Ok(());
        };
        let due = index.due(now.timestamp_millis());
        if due.is_empty() {
            return Ok(());
        }
        let mut claims = Vec::new();
        let mut newest = Vec::new();
        for id in &due {
            let Some(entry) = index.entries.get(id) else {
                continue;
            };
            let (instants, _) =
                entry
                    .schedule
                    .between(from_ms(entry.record.watermark_ms), now, LIST_CAP);
            let Some(last) = instants.last().copied() else {
                continue;
            };
            newest.push((id.clone(), last.timestamp_millis()));
            let mut planned = false;
            for (fire, skip) in plan::sort_out(&entry.record, instants, started, now) {
                let runs = skip.is_none();
                let claim = plan::claim(rt, &entry.record, &fire, skip, planned).await?;
                planned |= runs && !matches!(claim.claim.effect, FireEffect::Skip { .. });
                claims.push(claim);
            }
        }
        if let Err(err) = claim_all(rt, claims, now).await {
            // Nothing was claimed: read the routines again and retry.
            self.index = None;
            return Err(err);
        }
        for (id, last) in newest {
            index.reschedule(&id, last);
        }
        Ok(())
    }
}

/// Claims fires in one transaction, wakes the agents that got a message, and cancels the
/// runs a `replace` fire took over from.
pub(crate) async fn claim_all(
    rt: &Runtime,
    planned: Vec<plan::Planned>,
    now: DateTime<Utc>,
) -> Result<Vec<Claimed>, RuntimeError> {
    if planned.is_empty() {
        return Ok(Vec::new());
    }
    let mut after = Vec::with_capacity(planned.len());
    let mut claims = Vec::with_capacity(planned.len());
    for p in planned {
        let to = match &p.claim.effect {
            FireEffect::Deliver(letter) | FireEffect::Heartbeat(letter) => Some(letter.to.clone()),
            _ => None,
        };
        after.push((
            to,
            p.replaces,
            p.claim.routine_id.clone(),
            p.claim.key.clone(),
        ));
        claims.push(p.claim);
    }
    let claimed = rt
        .store()
        .claim_fires(claims, now.timestamp_millis())
        .await?;
    for ((to, replaces, routine, key), result) in after.iter().zip(&claimed) {
        let Claimed::Job { job_id, .. } = result else {
            continue;
        };
        if *replaces {
            for old in rt.store().open_routine_jobs(routine, usize::MAX).await? {
                if old < *job_id {
                    plan::cancel(rt, old, &format!("replaced by the fire {key}")).await?;
                }
            }
        }
        if let Some(agent) = to {
            rt.wake(agent);
        }
    }
    rt.bus().poke();
    Ok(claimed)
}

/// A fire that is not timed (manual, webhook, event), claimed at once.
pub(crate) async fn fire_now(
    rt: &Runtime,
    record: &RoutineRecord,
    fire: Fire,
) -> Result<Claimed, RuntimeError> {
    let now = rt.inner.scheduler.clock.now();
    let claim = plan::claim(rt, record, &fire, None, false).await?;
    let claimed = claim_all(rt, vec![claim], now).await?;
    rt.inner.scheduler.poke();
    claimed
        .into_iter()
        .next()
        .ok_or_else(|| RuntimeError::Conflict("the fire was not claimed".into()))
}
