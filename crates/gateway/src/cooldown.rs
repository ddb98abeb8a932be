//! Rate rules. The agent-to-agent cooldown: once a message from one agent reaches another, nothing
//! more passes between the two, either way, for the cooldown, so two agents that answer
//! each other stop instead of talking until a budget runs out. And [`Quiet`]: one answer per
//! person per period for what they may not do.

use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Cooldown {
    period: Duration,
    last: HashMap<(String, String), Instant>,
}

impl Cooldown {
    pub fn new(period: Duration) -> Self {
        Self {
            period,
            last: HashMap::new(),
        }
    }

    /// Whether a message from agent `from` to agent `to` may pass at `now`; a passing
    /// message starts the pair's cooldown.
    pub fn pass(&mut self, from: &str, to: &str, now: Instant) -> bool {
        let pair = if from <= to {
            (from.to_owned(), to.to_owned())
        } else {
            (to.to_owned(), from.to_owned())
        };
        if let Some(last) = self.last.get(&pair)
            && now.saturating_duration_since(*last) < self.period
        {
            return false;
        }
        self.last.insert(pair, now);
        // Forget pairs long cooled, so the map stays small.
        let period = self.period;
        self.last.retain(|_, at| {
            now.saturating_duration_since(*at) < period.max(Duration::from_secs(1)) * 4
        });
        true
    }
}

/// At most one answer per key per period: what a person who may not do something is told,
/// so they cannot make reef talk (or record) without bound.
#[derive(Debug)]
pub struct Quiet {
    period: Duration,
    last: HashMap<String, (Instant, u64)>,
}

impl Quiet {
    pub fn new(period: Duration) -> Self {
        Self {
            period,
            last: HashMap::new(),
        }
    }

    /// `Some(n)` when `key` may be answered at `now` (`n` earlier attempts were held since
    /// its last answer), `None` while it is held.
    pub fn pass(&mut self, key: &str, now: Instant) -> Option<u64> {
        let period = self.period;
        self.last
            .retain(|_, (at, _)| now.saturating_duration_since(*at) < period * 4);
        match self.last.get_mut(key) {
            Some((at, held)) if now.saturating_duration_since(*at) < period => {
                *held += 1;
                None
            }
            Some((at, held)) => {
                *at = now;
                Some(std::mem::take(held))
            }
            None => {
                self.last.insert(key.to_owned(), (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_quiet_for_the_period_in_both_directions() {
        let start = Instant::now();
        let mut cooldown = Cooldown::new(Duration::from_secs(10));
        assert!(cooldown.pass("ada", "bea", start));
        assert!(!cooldown.pass("bea", "ada", start + Duration::from_secs(1)));
        assert!(!cooldown.pass("ada", "bea", start + Duration::from_secs(9)));
        // Another pair is not affected.
        assert!(cooldown.pass("ada", "cy", start + Duration::from_secs(1)));
        assert!(cooldown.pass("bea", "ada", start + Duration::from_secs(10)));
    }

    #[test]
    fn a_person_is_answered_once_per_period_and_told_what_was_held() {
        let start = Instant::now();
        let mut quiet = Quiet::new(Duration::from_secs(10));
        assert_eq!(quiet.pass("mallory", start), Some(0));
        assert_eq!(quiet.pass("mallory", start + Duration::from_secs(1)), None);
        assert_eq!(quiet.pass("mallory", start + Duration::from_secs(2)), None);
        assert_eq!(quiet.pass("eve", start + Duration::from_secs(2)), Some(0));
        assert_eq!(
            quiet.pass("mallory", start + Duration::from_secs(10)),
            Some(2)
        );
    }

    #[test]
    fn a_zero_period_lets_everything_pass() {
        let start = Instant::now();
        let mut cooldown = Cooldown::new(Duration::ZERO);
        assert!(cooldown.pass("ada", "bea", start));
        assert!(cooldown.pass("bea", "ada", start));
    }
}
