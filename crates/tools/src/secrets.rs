//! Secrets a tool call asks for by name: read when the call runs, injected into that one
//! process's environment, and redacted from every tool output afterwards, so a value never
//! reaches the model's context or the transcript.

use reef_core::{SecretSource, SecretSpec, ToolError};
use std::sync::{Mutex, PoisonError};

/// Values shorter than this are not redacted (they would mangle ordinary output) and are
/// refused instead.
pub const MIN_SECRET_LEN: usize = 8;

/// The configured secrets plus every value read so far (for redaction).
#[derive(Debug, Default)]
pub struct Secrets {
    specs: Vec<SecretSpec>,
    seen: Mutex<Vec<(String, String)>>,
}

impl Secrets {
    pub fn new(specs: Vec<SecretSpec>) -> Self {
        Self {
            specs,
            seen: Mutex::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    pub fn specs(&self) -> &[SecretSpec] {
        &self.specs
    }

    /// Reads the value of `name` now. Errors name the secret and say what to fix; they never
    /// contain the value.
    pub fn read(&self, name: &str) -> Result<String, ToolError> {
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
        let value = match &spec.source {
            SecretSource::Env(var) => std::env::var(var).map_err(|_| {
                ToolError::Failed(format!(
                    "secret `{name}` is not available: reef's environment has no {var} \
                     (the operator must set it before starting reef)"
                ))
            })?,
            SecretSource::File(path) => std::fs::read_to_string(path)
                .map_err(|err| {
                    ToolError::Failed(format!(
                        "secret `{name}` is not available: cannot read {}: {err}",
                        path.display()
                    ))
                })?
                .trim_end_matches(['\n', '\r'])
                .to_owned(),
        };
        if value.chars().count() < MIN_SECRET_LEN {
            return Err(ToolError::Failed(format!(
                "secret `{name}` is shorter than {MIN_SECRET_LEN} characters, too short to be \
                 redacted from outputs reliably; refusing to use it"
            )));
        }
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if !seen.iter().any(|(n, v)| n == name && *v == value) {
            seen.push((name.to_owned(), value.clone()));
        }
        Ok(value)
    }

    /// `text` with every secret value read so far replaced by `[secret NAME]`.
    pub fn redact(&self, text: &str) -> String {
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
