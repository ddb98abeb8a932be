//! Scoped API tokens for the daemon's HTTP API: what a token may do ([`Scope`]), a new
//! token's secret text and the hash it is stored under (the secret itself is never kept),
//! and the sliding window that limits how many requests one token makes per minute.

use chacha20poly1305::aead::{OsRng, rand_core::RngCore};
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// What a token may do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Everything the API offers.
    Operator,
    /// Every read; no change of any kind.
    ReadOnly,
    /// One agent: read it, talk to it, follow its events.
    Agent(String),
}

impl Scope {
    /// The scopes' names, for messages.
    pub const FORMS: &'static str = "operator, read-only or agent:NAME";

    /// The agent an `agent:NAME` token is for.
    pub fn agent(&self) -> Option<&str> {
        match self {
            Scope::Agent(name) => Some(name),
            _ => None,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Operator => f.write_str("operator"),
            Scope::ReadOnly => f.write_str("read-only"),
            Scope::Agent(name) => write!(f, "agent:{name}"),
        }
    }
}

/// Why a scope's text was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown scope `{0}`: expected {forms}", forms = Scope::FORMS)]
pub struct ScopeError(pub String);

impl FromStr for Scope {
    type Err = ScopeError;

    fn from_str(text: &str) -> Result<Scope, ScopeError> {
        match text {
            "operator" => Ok(Scope::Operator),
            "read-only" | "readonly" => Ok(Scope::ReadOnly),
            _ => match text.strip_prefix("agent:") {
                Some(name) if valid_agent(name) => Ok(Scope::Agent(name.to_owned())),
                _ => Err(ScopeError(text.to_owned())),
            },
        }
    }
}

/// An agent name as the daemon accepts one: letters, digits, `-` and `_`.
fn valid_agent(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The prefix of every scoped token (tells it apart from the root token in a log or a leak
/// scan).
pub const TOKEN_PREFIX: &str = "reef_";

/// A freshly made token: the text handed to its holder once, and what is stored.
pub struct NewToken {
    /// `reef_` and 64 hex digits (256 random bits).
    pub secret: String,
    /// [`token_hash`] of the secret.
    pub hash: String,
    /// A short public id (the first 12 hex digits of the hash), for listings and logs.
    pub id: String,
}

/// `len` bytes of the OS's randomness as hex (a secret to hand a platform, say).
pub fn random_hex(len: usize) -> String {
    let mut bytes = vec![0u8; len];
    OsRng.fill_bytes(&mut bytes);
    hex(&bytes)
}

/// Makes a token from the OS's randomness.
pub fn new_token() -> NewToken {
    let secret = format!("{TOKEN_PREFIX}{}", random_hex(32));
    let hash = token_hash(&secret);
    let id = hash[..12].to_owned();
    NewToken { secret, hash, id }
}

/// The SHA-256 of a token's text, hex: a token is found by it without being kept. (The
/// token has 256 random bits, so a fast hash is enough: there is nothing to guess.)
pub fn token_hash(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How many requests a token may make in any minute: the times of the last ones, and a
/// refusal once the minute behind `now` already holds `limit` of them.
#[derive(Debug)]
pub struct SlidingWindow {
    limit: usize,
    window: Duration,
    times: VecDeque<Instant>,
}

impl SlidingWindow {
    /// At most `per_minute` requests in any 60 seconds.
    pub fn per_minute(per_minute: u32) -> SlidingWindow {
        SlidingWindow::new(per_minute, Duration::from_secs(60))
    }

    /// At most `limit` requests in any `window`.
    pub fn new(limit: u32, window: Duration) -> SlidingWindow {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        SlidingWindow {
            limit,
            window,
            times: VecDeque::with_capacity(limit.min(1024)),
        }
    }

    /// Counts a request at `now`, or refuses it with how long until one more is allowed.
    pub fn admit(&mut self, now: Instant) -> Result<(), Duration> {
        while let Some(&oldest) = self.times.front() {
            if now.saturating_duration_since(oldest) >= self.window {
                self.times.pop_front();
            } else {
                break;
            }
        }
        if self.times.len() >= self.limit {
            let oldest = self.times.front().copied().unwrap_or(now);
            return Err(self
                .window
                .saturating_sub(now.saturating_duration_since(oldest)));
        }
        self.times.push_back(now);
        Ok(())
    }

    /// The limit this window was made with.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_read_and_print() {
        for text in ["operator", "read-only", "agent:ada", "agent:build-bot_2"] {
            assert_eq!(text.parse::<Scope>().unwrap().to_string(), text);
        }
        for bad in ["", "admin", "agent:", "agent:a b", "agent:../x", "Operator"] {
            let err = bad.parse::<Scope>().unwrap_err();
            assert!(err.to_string().contains("agent:NAME"), "{err}");
        }
        assert_eq!(Scope::Agent("ada".into()).agent(), Some("ada"));
        assert_eq!(Scope::ReadOnly.agent(), None);
    }

    #[test]
    fn tokens_are_random_and_found_by_hash() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a.secret, b.secret);
        assert!(a.secret.starts_with(TOKEN_PREFIX));
        assert_eq!(a.secret.len(), TOKEN_PREFIX.len() + 64);
        assert_eq!(token_hash(&a.secret), a.hash);
        assert!(a.hash.starts_with(&a.id));
        assert!(!a.hash.contains(&a.secret[TOKEN_PREFIX.len()..]));
    }

    #[test]
    fn the_window_slides() {
        let start = Instant::now();
        let mut window = SlidingWindow::new(3, Duration::from_secs(60));
        let at = |s: u64| start + Duration::from_secs(s);
        assert!(window.admit(at(0)).is_ok());
        assert!(window.admit(at(10)).is_ok());
        assert!(window.admit(at(20)).is_ok());
        // The fourth within the minute waits until the first leaves it.
        assert_eq!(window.admit(at(30)), Err(Duration::from_secs(30)));
        // A refusal is not counted.
        assert_eq!(window.admit(at(59)), Err(Duration::from_secs(1)));
        assert!(window.admit(at(60)).is_ok());
        assert_eq!(window.admit(at(61)), Err(Duration::from_secs(9)));
        assert!(window.admit(at(70)).is_ok());
        // A whole quiet minute empties it.
        for s in 200..203 {
            assert!(window.admit(at(s)).is_ok());
        }
        assert!(window.admit(at(203)).is_err());
    }

    #[test]
    fn a_zero_limit_refuses_everything() {
        let mut window = SlidingWindow::per_minute(0);
        assert_eq!(window.admit(Instant::now()), Err(Duration::from_secs(60)));
    }
}
