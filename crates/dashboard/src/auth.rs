//! Who may use the dashboard: sign-in with the API token or a one-time link, sessions held
//! in memory (a restarted daemon asks again), each with its own CSRF token, and a lockout
//! for a client address that keeps guessing.

use std::collections::HashMap;
use std::io::Read;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a session lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// How long a one-time login link stays valid.
pub const LINK_LIFETIME: Duration = Duration::from_secs(300);
/// Wrong tokens from one address before it is locked out.
pub const MAX_FAILURES: u32 = 5;
/// How long a lockout lasts, and the window failures are counted in.
pub const LOCKOUT: Duration = Duration::from_secs(15 * 60);
/// Failed sign-ins remembered at most (addresses beyond it push out the oldest).
const MAX_TRACKED: usize = 10_000;

/// A signed-in browser.
#[derive(Clone, Debug)]
pub struct Session {
    pub id: String,
    pub csrf: String,
    pub expires: Instant,
}

/// Why a sign-in failed.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The token was wrong; `left` more tries before the lockout.
    WrongToken { left: u32 },
    /// Too many wrong tokens from this address: try again after `wait`.
    LockedOut { wait: Duration },
    /// The link was used already, expired or never existed.
    BadLink,
}

#[derive(Default)]
struct Failures {
    count: u32,
    first: Option<Instant>,
    locked_until: Option<Instant>,
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Session>,
    links: HashMap<String, Instant>,
    failures: HashMap<IpAddr, Failures>,
}

/// Sessions and login links, shared by the dashboard and the API route that makes links.
pub struct Logins {
    token: String,
    state: Mutex<State>,
}

impl Logins {
    /// Sign-ins checked against the daemon's API `token`.
    pub fn new(token: &str) -> Logins {
        Logins {
            token: token.to_owned(),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Signs in with the API token, from `client`.
    pub fn sign_in(&self, client: IpAddr, token: &str) -> Result<Session, Refusal> {
        let now = Instant::now();
        let mut state = self.state();
        forget_old_failures(&mut state.failures, now);
        let failures = state.failures.entry(client).or_default();
        if let Some(until) = failures.locked_until {
            if until > now {
                return Err(Refusal::LockedOut { wait: until - now });
            }
            *failures = Failures::default();
        }
        if !same(token.trim().as_bytes(), self.token.as_bytes()) {
            if failures.first.is_none_or(|first| now - first > LOCKOUT) {
                *failures = Failures {
                    count: 0,
                    first: Some(now),
                    locked_until: None,
                };
            }
            failures.count += 1;
            if failures.count >= MAX_FAILURES {
                failures.locked_until = Some(now + LOCKOUT);
                return Err(Refusal::LockedOut { wait: LOCKOUT });
            }
            return Err(Refusal::WrongToken {
                left: MAX_FAILURES - failures.count,
            });
        }
        state.failures.remove(&client);
        Ok(new_session(&mut state, now))
    }

    /// A new one-time login code (for `reef dashboard`).
    pub fn new_link(&self) -> String {
        let code = random_hex();
        let mut state = self.state();
        let now = Instant::now();
        state.links.retain(|_, made| now - *made < LINK_LIFETIME);
        state.links.insert(code.clone(), now);
        code
    }

    /// Signs in with a login link's code, which is used up.
    pub fn follow_link(&self, code: &str) -> Result<Session, Refusal> {
        let now = Instant::now();
        let mut state = self.state();
        match state.links.remove(code) {
            Some(made) if now - made < LINK_LIFETIME => Ok(new_session(&mut state, now)),
            _ => Err(Refusal::BadLink),
        }
    }

    /// The live session with this cookie value.
    pub fn session(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let mut state = self.state();
        match state.sessions.get(id) {
            Some(session) if session.expires > now => Some(session.clone()),
            Some(_) => {
                state.sessions.remove(id);
                None
            }
            None => None,
        }
    }

    /// Ends a session.
    pub fn sign_out(&self, id: &str) {
        self.state().sessions.remove(id);
    }
}

/// Drops failures older than the lockout window, and the oldest beyond [`MAX_TRACKED`]
/// (addresses that rotate cannot grow the map without bound).
fn forget_old_failures(failures: &mut HashMap<IpAddr, Failures>, now: Instant) {
    failures.retain(|_, f| {
        f.locked_until.is_some_and(|until| until > now)
            || f.first.is_some_and(|first| now - first < LOCKOUT)
    });
    while failures.len() >= MAX_TRACKED {
        let oldest = failures
            .iter()
            .min_by_key(|(_, f)| f.first)
            .map(|(ip, _)| *ip);
        match oldest {
            Some(ip) => failures.remove(&ip),
            None => break,
        };
    }
}

fn new_session(state: &mut State, now: Instant) -> Session {
    state.sessions.retain(|_, s| s.expires > now);
    let session = Session {
        id: random_hex(),
        csrf: random_hex(),
        expires: now + SESSION_LIFETIME,
    };
    state.sessions.insert(session.id.clone(), session.clone());
    session
}

/// Compares in time that does not depend on where the inputs differ.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// 32 bytes from the OS's randomness, as hex.
pub(crate) fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    // The kernel's randomness is always readable on Linux; without it nothing is safe to
    // hand out, so this is fatal rather than a weaker fallback.
    #[allow(
        clippy::expect_used,
        reason = "no session can be made without randomness"
    )]
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("read /dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn the_fifth_wrong_token_locks_the_address_out_and_not_others() {
        let logins = Logins::new(TOKEN);
        let mallory: IpAddr = [10, 0, 0, 1].into();
        for left in (1..MAX_FAILURES).rev() {
            assert_eq!(
                logins.sign_in(mallory, "guess").unwrap_err(),
                Refusal::WrongToken { left }
            );
        }
        assert!(matches!(
            logins.sign_in(mallory, "guess"),
            Err(Refusal::LockedOut { .. })
        ));
        // Locked out even with the right token now; another address is not.
        assert!(matches!(
            logins.sign_in(mallory, TOKEN),
            Err(Refusal::LockedOut { .. })
        ));
        let alice: IpAddr = [10, 0, 0, 2].into();
        let session = logins.sign_in(alice, TOKEN).unwrap();
        assert_eq!(logins.session(&session.id).unwrap().csrf, session.csrf);
        assert_ne!(session.id, session.csrf);
    }

    #[test]
    fn a_link_signs_in_once() {
        let logins = Logins::new(TOKEN);
        let code = logins.new_link();
        let session = logins.follow_link(&code).unwrap();
        assert!(logins.session(&session.id).is_some());
        assert_eq!(logins.follow_link(&code).unwrap_err(), Refusal::BadLink);
        logins.sign_out(&session.id);
        assert!(logins.session(&session.id).is_none());
    }
}
