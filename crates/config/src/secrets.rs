//! `[secrets.NAME]`: secrets a tool call may ask for by name. The configuration holds only
//! where each value lives (an environment variable or a file); values are read when a call
//! needs them and never enter the configuration, the transcript or the model's context.

use crate::error::ConfigError;
use crate::raw::SecretToml;
use reef_core::{SecretSource, SecretSpec};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Reads a secret's value now: the environment variable, the file without its trailing
/// line breaks, or the vault entry (unlocked with its configured passphrase if need be). The
/// error names the secret and says what to fix; it never holds the value.
pub fn read_secret(
    spec: &SecretSpec,
    vault: Option<&crate::Vault>,
) -> Result<crate::Secret, String> {
    match &spec.source {
        SecretSource::Env(var) => std::env::var(var).map(crate::Secret::new).map_err(|_| {
            format!(
                "secret `{}` is not available: reef's environment has no {var} (set it \
                 before starting reef)",
                spec.name
            )
        }),
        SecretSource::Vault => {
            let vault = vault.ok_or_else(|| {
                format!(
                    "secret `{}` is in the vault, which is not open here",
                    spec.name
                )
            })?;
            vault
                .read(&spec.name)
                .map(|v| crate::Secret::new(v.as_str()))
                .map_err(|err| format!("secret `{}` is not available: {err}", spec.name))
        }
        SecretSource::File(path) => std::fs::read_to_string(path)
            .map(|v| crate::Secret::new(v.trim_end_matches(['\n', '\r'])))
            .map_err(|err| {
                format!(
                    "secret `{}` is not available: cannot read {}: {err}",
                    spec.name,
                    path.display()
                )
            }),
    }
}

pub(crate) fn resolve(
    raw: BTreeMap<String, SecretToml>,
    home: &Path,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<Vec<SecretSpec>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for (name, secret) in raw {
        let key = format!("secrets.{name}");
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin_of(&key),
            key: key.clone(),
            message,
        };
        if !is_env_name(&name) {
            return Err(invalid(
                "a secret's name becomes an environment variable: use letters, digits and _, \
                 not starting with a digit (e.g. GITHUB_TOKEN)"
                    .into(),
            ));
        }
        let source = match (secret.env, secret.file) {
            (Some(var), None) if is_env_name(&var) => SecretSource::Env(var),
            (Some(var), None) => {
                return Err(invalid(format!(
                    "env = {var:?} is not an environment variable name"
                )));
            }
            (None, Some(file)) if !file.is_empty() => {
                let path = PathBuf::from(file);
                SecretSource::File(if path.is_absolute() {
                    path
                } else {
                    home.join(path)
                })
            }
            (None, Some(_)) => return Err(invalid("file must not be empty".into())),
            (Some(_), Some(_)) => {
                return Err(invalid("set either env or file, not both".into()));
            }
            (None, None) => {
                return Err(invalid(
                    "say where the value lives: env = \"VARIABLE\" or file = \"PATH\"".into(),
                ));
            }
        };
        let policy =
            crate::vault::policy_of(secret.policy.as_deref(), secret.only_for).map_err(invalid)?;
        out.push(SecretSpec {
            name,
            source,
            description: secret.description,
            policy,
        });
    }
    Ok(out)
}

/// Whether `name` may name a secret; the error says what a name must be.
pub fn check_secret_name(name: &str) -> Result<(), String> {
    if is_env_name(name) {
        Ok(())
    } else {
        Err(format!(
            "{name:?}: a secret's name becomes an environment variable: use letters, digits \
             and _, not starting with a digit (e.g. GITHUB_TOKEN)"
        ))
    }
}

pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
