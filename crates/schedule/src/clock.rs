//! The clock the scheduler reads and sleeps on. [`SystemClock`] is wall time, slept in naps of
//! at most [`MAX_NAP`] so a clock that is set forward or back is noticed within one nap;
//! [`ManualClock`] only moves when told, so tests can walk through a month in milliseconds and
//! know when the scheduler has caught up.

use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The longest the system clock sleeps before looking at the time again.
pub const MAX_NAP: Duration = Duration::from_secs(60);

/// Wall time for the scheduler.
#[async_trait::async_trait]
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    fn now(&self) -> DateTime<Utc>;
    /// Returns at `deadline` or earlier; callers read `now()` again and decide.
    async fn sleep_until(&self, deadline: DateTime<Utc>);

    /// The sleeper is about to be woken by something else than the clock (work arrived): a
    /// clock moved by hand must not take it for idle until it sleeps again.
    fn waking(&self) {}
}

/// The machine's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

#[async_trait::async_trait]
impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    async fn sleep_until(&self, deadline: DateTime<Utc>) {
        let wait = (deadline - Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO)
            .min(MAX_NAP);
        tokio::time::sleep(wait).await;
    }
}

#[derive(Clone, Copy, Debug)]
struct Hands {
    now: DateTime<Utc>,
    /// The deadline the sleeper waits for, while it sleeps.
    parked: Option<DateTime<Utc>>,
}

/// A clock moved by hand, for one sleeper (the scheduler): [`ManualClock::advance_to`] walks
/// time forward from one of the sleeper's deadlines to the next, each time waiting until the
/// sleeper has done its work and gone back to sleep.
#[derive(Clone, Debug)]
pub struct ManualClock {
    hands: Arc<watch::Sender<Hands>>,
}

impl ManualClock {
    pub fn new(now: DateTime<Utc>) -> ManualClock {
        ManualClock {
            hands: Arc::new(watch::Sender::new(Hands { now, parked: None })),
        }
    }

    /// Waits until the sleeper is asleep with a deadline still ahead (it has done all that
    /// was due), and returns that deadline.
    pub async fn settled(&self) -> DateTime<Utc> {
        let mut rx = self.hands.subscribe();
        let hands = rx
            .wait_for(|h| h.parked.is_some_and(|d| d > h.now))
            .await
            .map(|h| *h);
        hands
            .ok()
            .and_then(|h| h.parked)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// Moves time to `until`, stopping at every deadline on the way and waiting there until
    /// the sleeper has gone back to sleep; returns when it sleeps past `until`.
    pub async fn advance_to(&self, until: DateTime<Utc>) {
        loop {
            let deadline = self.settled().await;
            if deadline > until {
                self.hands.send_modify(|h| h.now = h.now.max(until));
                return;
            }
            self.hands.send_modify(|h| h.now = deadline);
        }
    }

    /// Sets the time without waiting for anyone (a clock jump).
    pub fn set(&self, now: DateTime<Utc>) {
        self.hands.send_modify(|h| h.now = now);
    }
}

/// Clears the parked deadline when the sleep ends or is abandoned.
struct Unpark<'a>(&'a watch::Sender<Hands>);

impl Drop for Unpark<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|h| h.parked = None);
    }
}

#[async_trait::async_trait]
impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        self.hands.borrow().now
    }

    fn waking(&self) {
        self.hands.send_modify(|h| h.parked = None);
    }

    async fn sleep_until(&self, deadline: DateTime<Utc>) {
        let mut rx = self.hands.subscribe();
        self.hands.send_modify(|h| h.parked = Some(deadline));
        let _unpark = Unpark(&self.hands);
        // The sender lives as long as `self`, so this wait only ends when the time comes;
        // the guard it returns is released at once.
        drop(rx.wait_for(|h| h.now >= deadline).await);
    }
}
