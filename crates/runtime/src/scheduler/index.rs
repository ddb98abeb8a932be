//! The scheduler's index: every enabled timed routine with its next due instant, ordered by
//! it, refreshed routine by routine when one changes. Parsed cron expressions are shared
//! between routines that use the same one.

use crate::error::RuntimeError;
use crate::kernel::Runtime;
use chrono::{DateTime, Utc};
use reef_schedule::{Schedule, schedule_of};
use reef_store::RoutineRecord;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

pub(super) struct Entry {
    pub record: RoutineRecord,
    pub schedule: Arc<Schedule>,
    pub next_ms: Option<i64>,
}

/// Every enabled timed routine by id, and the order they fall due in.
#[derive(Default)]
pub(super) struct Index {
    pub entries: HashMap<String, Entry>,
    /// Routine name to id, for routines read again by name.
    ids: HashMap<String, String>,
    /// Parsed cron expressions by (expression, zone), shared by the routines that use one: a
    /// parsed expression holds a few kilobytes.
    crons: HashMap<(String, String), Arc<Schedule>>,
    queue: BTreeSet<(i64, String)>,
}

impl Index {
    pub(super) async fn load(rt: &Runtime, now_ms: i64) -> Result<Index, RuntimeError> {
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
    pub(super) fn refresh(&mut self, name: &str, record: Option<RoutineRecord>, now_ms: i64) {
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

    pub(super) fn due(&mut self, now_ms: i64) -> Vec<String> {
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

    pub(super) fn reschedule(&mut self, id: &str, watermark_ms: i64) {
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

    pub(super) fn next(&self) -> Option<DateTime<Utc>> {
        self.queue.first().map(|(ms, _)| from_ms(*ms))
    }
}

pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::<Utc>::MIN_UTC)
}
