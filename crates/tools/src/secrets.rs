//! Secrets a tool call asks for by name: read when the call runs, injected into that one
//! process's environment, and redacted from every tool output afterwards, so a value never
//! reaches the model's context or the transcript. Every value read is also fingerprinted (a
//! salted hash, never the value), and the session keeps the agent's fingerprints in the
//! store, so a later session redacts a value it never read itself.

use reef_core::{SecretFingerprint, SecretSpec, SecretUse, ToolError};
use reef_security::leak::{LeakPolicy, LeakScanner, Review};
use reef_security::{fingerprint, fingerprint_matches, redact_fingerprinted};
use std::sync::{Mutex, PoisonError};

/// Values shorter than this are not redacted (they would mangle ordinary output) and are
/// refused instead.
pub const MIN_SECRET_LEN: usize = 8;

/// The configured secrets, every value read so far, and the fingerprints of values read in
/// this or earlier sessions (for redaction).
#[derive(Debug, Default)]
pub struct Secrets {
    specs: Vec<SecretSpec>,
    /// Where `SecretSource::Vault` values are read.
    vault: Option<std::sync::Arc<reef_config::Vault>>,
    /// Names of `with-approval` secrets the operator approved for the next use.
    approved: Mutex<Vec<String>>,
    /// What the leak detector does with what it finds in outgoing text.
    leaks: LeakPolicy,
    seen: Mutex<Vec<(String, String)>>,
    fingerprints: Mutex<Fingerprints>,
    /// Where new fingerprints are kept, and for which agent (see [`Secrets::attach`]).
    ledger: Mutex<Option<(reef_store::Store, String)>>,
}

#[derive(Debug, Default)]
struct Fingerprints {
    /// Every fingerprint known: remembered from the store and made here.
    known: Vec<SecretFingerprint>,
    /// Made here and not yet handed to the store.
    fresh: Vec<SecretFingerprint>,
}

impl Secrets {
    pub fn new(specs: Vec<SecretSpec>) -> Self {
        Self {
            specs,
            vault: None,
            approved: Mutex::default(),
            leaks: LeakPolicy::default(),
            seen: Mutex::default(),
            fingerprints: Mutex::default(),
            ledger: Mutex::default(),
        }
    }

    /// Reads `SecretSource::Vault` secrets from `vault`.
    pub fn with_vault(mut self, vault: std::sync::Arc<reef_config::Vault>) -> Self {
        self.vault = Some(vault);
        self
    }

    /// Applies `policy` to outgoing text ([`Secrets::review_outgoing`]).
    pub fn with_leak_policy(mut self, policy: LeakPolicy) -> Self {
        self.leaks = policy;
        self
    }

    /// The leak detector's verdict on `text`, about to leave for `hosts` (`None`: anywhere).
    /// Known secrets are every configured secret readable now without asking anyone (the
    /// environment, files, an unlocked vault) and every value read in this session; one may
    /// go to a host its `only-for` policy names.
    pub fn review_outgoing(&self, text: &str, hosts: Option<&[String]>) -> Review {
        let known = self.known_values();
        let scanner = LeakScanner::new(known.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        self.leaks.review(&scanner, text, |finding| {
            let (Some(name), Some(hosts)) = (&finding.secret, hosts) else {
                return false;
            };
            let Some(spec) = self.specs.iter().find(|s| &s.name == name) else {
                return false;
            };
            !hosts.is_empty()
                && hosts.iter().all(|h| {
                    spec.policy
                        .domains()
                        .any(|d| reef_core::domain_matches(d, h))
                })
        })
    }

    /// Every secret value known now: names and values.
    fn known_values(&self) -> Vec<(String, zeroize::Zeroizing<String>)> {
        let mut out: Vec<(String, zeroize::Zeroizing<String>)> = self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(n, v)| (n.clone(), zeroize::Zeroizing::new(v.clone())))
            .collect();
        let vault_open = self.vault.as_ref().is_some_and(|v| v.is_unlocked());
        for spec in &self.specs {
            if spec.source == reef_core::SecretSource::Vault && !vault_open {
                continue;
            }
            if let Ok(value) = reef_config::read_secret(spec, self.vault.as_deref()) {
                let value = zeroize::Zeroizing::new(value.expose().to_owned());
                if !out.iter().any(|(n, v)| n == &spec.name && *v == value) {
                    out.push((spec.name.clone(), value));
                }
            }
        }
        out
    }

    /// The operator approved one use of each of `names` (a `with-approval` secret).
    pub fn approve(&self, names: &[String]) {
        self.approved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(names.iter().cloned());
    }

    /// Of `names`, those whose policy is `with-approval`.
    pub fn needing_approval<'a>(&self, names: &'a [String]) -> Vec<&'a str> {
        names
            .iter()
            .filter(|n| {
                self.specs
                    .iter()
                    .any(|s| &s.name == *n && s.policy == reef_core::SecretPolicy::WithApproval)
            })
            .map(String::as_str)
            .collect()
    }

    /// Keeps fingerprints in `store` for `agent` from now on, and redacts the values behind the
    /// ones it already holds (from the agent's earlier sessions).
    pub async fn attach(
        &self,
        store: reef_store::Store,
        agent: &str,
    ) -> Result<(), reef_store::StoreError> {
        self.remember(store.secret_fingerprints(agent).await?);
        *self.ledger.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((store, agent.to_owned()));
        Ok(())
    }

    /// Records that `tool` is about to use the secrets `names` (sending them to `to`, when it
    /// is a request): the fingerprints of values first read since the last call and a
    /// `secret.used` audit record (names, never values), in one write to the store (when one
    /// is attached). Called before a command that was given a secret starts, so that a turn
    /// cut short (timeout, interrupt, a killed reef) cannot lose one; when the write fails the
    /// command must not run.
    pub async fn persist(
        &self,
        tool: &str,
        names: &[String],
        to: Option<&str>,
    ) -> Result<(), ToolError> {
        let ledger = self
            .ledger
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some((store, agent)) = ledger else {
            return Ok(());
        };
        let fresh = self.take_fresh();
        if fresh.is_empty() && names.is_empty() {
            return Ok(());
        }
        let used = reef_store::SecretUse {
            agent: &agent,
            tool,
            names,
            to,
        };
        if let Err(err) = store.record_secret_use(used, &fresh).await {
            // Not kept: try again with the next call, and do not run this one.
            self.fingerprints
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .fresh
                .extend(fresh);
            return Err(ToolError::Failed(format!(
                "cannot record that a secret was used ({err}); the command did not run"
            )));
        }
        Ok(())
    }

    /// Adds fingerprints remembered from earlier sessions: their values are redacted too.
    pub fn remember(&self, fingerprints: Vec<SecretFingerprint>) {
        let mut f = self
            .fingerprints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for fp in fingerprints {
            if !f.known.iter().any(|k| k.hash == fp.hash) {
                f.known.push(fp);
            }
        }
    }

    /// The fingerprints of values first read since the last call, for the store.
    fn take_fresh(&self) -> Vec<SecretFingerprint> {
        let mut f = self
            .fingerprints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut f.fresh)
    }

    /// Fingerprints `value` unless a known fingerprint already matches it.
    fn fingerprint(&self, name: &str, value: &str) {
        let mut f = self
            .fingerprints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if f.known.iter().any(|k| fingerprint_matches(k, value)) {
            return;
        }
        // A fresh salt per fingerprint: uuid v7 carries 74 random bits.
        let salt = uuid::Uuid::now_v7().into_bytes();
        let fp = fingerprint(name, value, &salt);
        f.known.push(fp.clone());
        f.fresh.push(fp);
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    pub fn specs(&self) -> &[SecretSpec] {
        &self.specs
    }

    /// Reads the value of `name` now, for `used` (its policy decides whether that use may have
    /// it). Errors name the secret and say what to fix; they never contain the value.
    pub fn read(&self, name: &str, used: &SecretUse<'_>) -> Result<String, ToolError> {
        let spec = self.specs.iter().find(|s| s.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
            ToolError::InvalidArguments(format!(
                "unknown secret `{name}`; configured secrets: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ))
        })?;
        // A vault secret's policy as the vault holds it now (it may have changed since start).
        let (value, policy) = match (&spec.source, &self.vault) {
            (reef_core::SecretSource::Vault, Some(vault)) => {
                let (value, policy) = vault.read_entry(name).map_err(|err| {
                    ToolError::Failed(format!("secret `{name}` is not available: {err}"))
                })?;
                (value.as_str().to_owned(), policy)
            }
            _ => (
                reef_config::read_secret(spec, self.vault.as_deref())
                    .map_err(ToolError::Failed)?
                    .expose()
                    .to_owned(),
                spec.policy.clone(),
            ),
        };
        // An approval the operator gave is used up by this one use.
        let approved = policy == reef_core::SecretPolicy::WithApproval && {
            let mut list = self.approved.lock().unwrap_or_else(PoisonError::into_inner);
            match list.iter().position(|n| n == name) {
                Some(i) => {
                    list.remove(i);
                    true
                }
                None => false,
            }
        };
        let used = SecretUse {
            approved: used.approved || approved,
            ..*used
        };
        policy.allows(name, &used).map_err(ToolError::Denied)?;
        if value.chars().count() < MIN_SECRET_LEN {
            return Err(ToolError::Failed(format!(
                "secret `{name}` is shorter than {MIN_SECRET_LEN} characters, too short to be \
                 redacted from outputs reliably; refusing to use it"
            )));
        }
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if !seen.iter().any(|(n, v)| n == name && *v == value) {
            seen.push((name.to_owned(), value.clone()));
            self.fingerprint(name, &value);
        }
        Ok(value)
    }

    /// `text` with every secret value read so far, or fingerprinted in an earlier session,
    /// replaced by `[secret NAME]`.
    pub fn redact(&self, text: &str) -> String {
        let seen = self.redact_seen(text);
        let f = self
            .fingerprints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        redact_fingerprinted(&seen, &f.known)
    }

    /// `text` with every value read in this session replaced.
    fn redact_seen(&self, text: &str) -> String {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = text.to_owned();
        // Longest first, so a value containing another is replaced whole.
        let mut values: Vec<&(String, String)> = seen.iter().collect();
        values.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        for (name, value) in values {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("[secret {name}]"));
            }
        }
        out
    }
}
