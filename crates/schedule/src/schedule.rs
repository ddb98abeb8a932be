//! A time trigger: a cron expression in a zone, or a fixed interval counted from an anchor.

use crate::cron::CronExpr;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// When a routine fires by the clock.
#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    Cron(Box<CronExpr>),
    /// Every `period`, at `anchor + k × period` (real time: daylight saving does not move it).
    Every {
        period: Duration,
        anchor: DateTime<Utc>,
    },
}

impl Schedule {
    /// The first fire strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron(expr) => expr.next_after(after),
            Schedule::Every { period, anchor } => {
                let period_ms = i64::try_from(period.as_millis()).ok()?.max(1);
                if after < *anchor {
                    return Some(*anchor);
                }
                let elapsed = (after - *anchor).num_milliseconds();
                let k = elapsed / period_ms + 1;
                anchor.checked_add_signed(chrono::Duration::milliseconds(k.checked_mul(period_ms)?))
            }
        }
    }

    /// The fires in `(after, until]`, oldest first, at most `cap` of them (the newest `cap`
    /// when there are more: catching up favours what is recent). The flag says whether any
    /// were left out.
    pub fn between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        cap: usize,
    ) -> (Vec<DateTime<Utc>>, bool) {
        let mut out = std::collections::VecDeque::new();
        let mut dropped = false;
        let mut at = after;
        while let Some(next) = self.next_after(at) {
            if next > until {
                break;
            }
            if out.len() == cap {
                out.pop_front();
                dropped = true;
            }
            if cap > 0 {
                out.push_back(next);
            } else {
                dropped = true;
            }
            at = next;
        }
        (out.into(), dropped)
    }
}
