//! The scheduler: one task that fires routines exactly once. It keeps the next due instant of
//! every enabled timed routine in memory, sleeps on the [`Clock`] until the earliest (no
//! polling), and wakes early when a routine changes, a run ends, or an event arrives that an
//! event routine listens for. Each due fire is claimed in the store together with its effect
//! (`plan`), spawned runs are started and timed out (`runs`), and everything it decides is
//! read back from the store after a restart: the watermark of each routine says which timed
//! fires are settled, and the fires table refuses a second claim of the same identity.

mod events;
pub(crate) mod heartbeat;
pub(crate) mod plan;
mod runs;

use crate::error::RuntimeError;
use crate::kernel::{Inner, Runtime};
use chrono::{DateTime, Utc};
use plan::Fire;
use reef_schedule::{Clock, Schedule, schedule_of};
use reef_store::{Claimed, FireEffect, RoutineRecord};
use std::collections::{BTreeSet, HashMap};
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
        self.wake.notify_one();
    }

    /// Routines changed that cannot be named (a reconciliation, an agent's deleted with it):
    /// read them all again.
    pub(crate) fn changed(&self) {
        self.dirty.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Something finished (a run) or arrived: look again.
    pub(crate) fn poke(&self) {
        self.wake.notify_one();
    }
}

struct Entry {
    record: RoutineRecord,
    schedule: Arc<Schedule>,
    next_ms: Option<i64>,
}

/// Every enabled timed routine by id, and the order they fall due in.
#[derive(Default)]
struct Index {
    entries: HashMap<String, Entry>,
    /// Routine name to id, for routines read again by name.
    ids: HashMap<String, String>,
    /// Parsed cron expressions by (expression, zone), shared by the routines that use one: a
    /// parsed expression holds a few kilobytes.
    crons: HashMap<(String, String), Arc<Schedule>>,
    queue: BTreeSet<(i64, String)>,
}

impl Index {
    async fn load(rt: &Runtime, now_ms: i64) -> Result<Index, RuntimeError> {
        let mut index = Index::default();
        for record in rt.store().list_routines().await? {
            index.insert(record, now_ms);
        }
        Ok(index)
    }

    /// Adds an enabled timed routine.
    fn insert(&mut self, mut record: RoutineRecord, now_ms: i64) {
        if !record.enabled || !record.spec.trigger.is_timed() {
            return;
        }
        // A watermark ahead of the clock means the clock was set back after running ahead:
        // counting from it would silence the routine until then. The fires already claimed
        // keep their identities, so none repeats.
        if record.watermark_ms > now_ms + 60_000 {
            tracing::warn!(routine = %record.name, "the routine's last fire is in the future; the clock was set back: counting from now");
            record.watermark_ms = now_ms;
        }
        let cron_key = match &record.spec.trigger {
            reef_core::Trigger::Cron { expr, tz } => Some((expr.clone(), tz.clone())),
            _ => None,
        };
        let cached = cron_key.as_ref().and_then(|k| self.crons.get(k)).cloned();
        let schedule = match cached {
            Some(schedule) => schedule,
            None => match schedule_of(&record.spec.trigger, from_ms(record.anchor_ms)) {
                Ok(Some(schedule)) => {
                    let schedule = Arc::new(schedule);
                    if let Some(key) = cron_key {
                        self.crons.insert(key, schedule.clone());
                    }
                    schedule
                }
                Ok(None) => return,
                Err(err) => {
                    tracing::warn!(routine = %record.name, error = %err, "a stored routine cannot be scheduled");
                    return;
                }
            },
        };
        let next_ms = schedule
            .next_after(from_ms(record.watermark_ms))
            .map(|t| t.timestamp_millis());
        if let Some(ms) = next_ms {
            self.queue.insert((ms, record.id.clone()));
        }
        self.ids.insert(record.name.clone(), record.id.clone());
        self.entries.insert(
            record.id.clone(),
            Entry {
                record,
                schedule,
                next_ms,
            },
        );
    }

    /// Replaces what is known of routine `name` with `record` (`None`: it is gone).
    fn refresh(&mut self, name: &str, record: Option<RoutineRecord>, now_ms: i64) {
        if let Some(id) = self.ids.remove(name)
            && let Some(old) = self.entries.remove(&id)
            && let Some(ms) = old.next_ms
        {
            self.queue.remove(&(ms, id));
        }
        if let Some(record) = record {
            self.insert(record, now_ms);
        }
    }

    fn due(&mut self, now_ms: i64) -> Vec<String> {
        let mut out = Vec::new();
        while let Some((ms, _)) = self.queue.first()
            && *ms <= now_ms
        {
            if let Some((_, id)) = self.queue.pop_first() {
                out.push(id);
            }
        }
        out
    }

    fn reschedule(&mut self, id: &str, watermark_ms: i64) {
        if let Some(entry) = self.entries.get_mut(id) {
            entry.record.watermark_ms = entry.record.watermark_ms.max(watermark_ms);
            entry.next_ms = entry
                .schedule
                .next_after(from_ms(entry.record.watermark_ms))
                .map(|t| t.timestamp_millis());
            if let Some(ms) = entry.next_ms {
                self.queue.insert((ms, id.to_owned()));
            }
        }
    }

    fn next(&self) -> Option<DateTime<Utc>> {
        self.queue.first().map(|(ms, _)| from_ms(*ms))
    }
}

pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::<Utc>::MIN_UTC)
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
                    Ok(event) if events::wakes(&event) => break,
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
