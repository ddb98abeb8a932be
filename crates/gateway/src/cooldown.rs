//! The agent-to-agent cooldown: once a message from one agent reaches another, nothing
//! more passes between the two, either way, for the cooldown, so two agents that answer
//! each other stop instead of talking until a budget runs out.

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
    fn a_zero_period_lets_everything_pass() {
        let start = Instant::now();
        let mut cooldown = Cooldown::new(Duration::ZERO);
        assert!(cooldown.pass("ada", "bea", start));
        assert!(cooldown.pass("bea", "ada", start));
    }
}
