//! Flood control for one connection: a token bucket that lets `burst` lines go at once and
//! then one line per `interval`, the pace IRC servers expect before they disconnect a client
//! for "excess flood".

use std::time::{Duration, Instant};

/// A token bucket over lines.
#[derive(Clone, Debug)]
pub struct Flood {
    burst: u32,
    interval: Duration,
    tokens: u32,
    /// When the last token was added (or the bucket was full).
    refilled: Instant,
}

impl Flood {
    /// A full bucket. A `burst` of 0 is taken as 1, an interval of zero disables pacing.
    pub fn new(burst: u32, interval: Duration, now: Instant) -> Self {
        let burst = burst.max(1);
        Self {
            burst,
            interval,
            tokens: burst,
            refilled: now,
        }
    }

    /// Takes a token for one line at `now`, or says how long to wait for one.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens > 0 {
            self.tokens -= 1;
            return Ok(());
        }
        let next = self.refilled + self.interval;
        Err(next
            .saturating_duration_since(now)
            .max(Duration::from_millis(1)))
    }

    fn refill(&mut self, now: Instant) {
        if self.interval.is_zero() {
            self.tokens = self.burst;
            self.refilled = now;
            return;
        }
        if self.tokens >= self.burst {
            self.refilled = now;
            return;
        }
        let elapsed = now.saturating_duration_since(self.refilled);
        let earned = elapsed.as_nanos() / self.interval.as_nanos();
        if earned == 0 {
            return;
        }
        let earned = u32::try_from(earned).unwrap_or(u32::MAX);
        self.tokens = self.tokens.saturating_add(earned).min(self.burst);
        if self.tokens >= self.burst {
            self.refilled = now;
        } else {
            self.refilled += self.interval * earned;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_goes_at_once_then_one_line_per_interval() {
        let start = Instant::now();
        let interval = Duration::from_millis(2000);
        let mut flood = Flood::new(3, interval, start);
        for _ in 0..3 {
            assert_eq!(flood.take(start), Ok(()));
        }
        assert_eq!(flood.take(start), Err(interval));
        let later = start + Duration::from_millis(500);
        assert_eq!(flood.take(later), Err(Duration::from_millis(1500)));
        assert_eq!(flood.take(start + interval), Ok(()));
        assert!(flood.take(start + interval).is_err());
        // Ten quiet intervals fill the bucket back up to the burst, not beyond.
        let quiet = start + interval * 12;
        for _ in 0..3 {
            assert_eq!(flood.take(quiet), Ok(()));
        }
        assert!(flood.take(quiet).is_err());
    }

    #[test]
    fn partial_intervals_are_not_lost() {
        let start = Instant::now();
        let interval = Duration::from_millis(100);
        let mut flood = Flood::new(2, interval, start);
        assert_eq!(flood.take(start), Ok(()));
        assert_eq!(flood.take(start), Ok(()));
        // 150 ms earns one token; the 50 ms left count toward the next.
        assert_eq!(flood.take(start + Duration::from_millis(150)), Ok(()));
        assert_eq!(
            flood.take(start + Duration::from_millis(160)),
            Err(Duration::from_millis(40))
        );
        assert_eq!(flood.take(start + Duration::from_millis(200)), Ok(()));
    }

    #[test]
    fn zero_interval_means_no_pacing() {
        let start = Instant::now();
        let mut flood = Flood::new(0, Duration::ZERO, start);
        for _ in 0..100 {
            assert_eq!(flood.take(start), Ok(()));
        }
    }
}
