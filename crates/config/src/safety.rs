//! `[safety]`: what the safety layer does with content from outside the operator's control,
//! per source (`[safety.sources]`: `fetched`, `mcp`, `skill`, `file`, `channel`, `webhook`),
//! and what the leak detector does with each kind of credential it finds in what is about to
//! leave reef (`[safety.leaks]`: `default`, `secret`, or a pattern id); each `ignore`, `warn`,
//! `sanitize` or `block`.

use crate::error::ConfigError;
use reef_core::ContentSource;
use reef_security::leak::{LeakAction, LeakPolicy};
use reef_security::safety::SafetyPolicy;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SafetyToml {
    #[serde(default)]
    pub leaks: BTreeMap<String, String>,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// The resolved `[safety]` section.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SafetyConfig {
    /// The action for each kind of leak finding.
    pub leaks: LeakPolicy,
    /// The action for each source of untrusted content.
    pub sources: SafetyPolicy,
}

pub(crate) fn resolve(
    raw: SafetyToml,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<SafetyConfig, ConfigError> {
    let mut leaks = LeakPolicy::default();
    let kinds = LeakPolicy::kinds();
    for (kind, action) in raw.leaks {
        let key = format!("safety.leaks.{kind}");
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin_of(&key),
            key: key.clone(),
            message,
        };
        let action: LeakAction = action.parse().map_err(invalid)?;
        if kind == "default" {
            leaks.default = action;
        } else if kinds.contains(&kind.as_str()) {
            leaks.by_kind.insert(kind, action);
        } else {
            return Err(invalid(format!(
                "`{kind}` is not a kind of finding; use default, {}",
                kinds.join(", ")
            )));
        }
    }
    let mut sources = SafetyPolicy::default();
    for (name, action) in raw.sources {
        let key = format!("safety.sources.{name}");
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin_of(&key),
            key: key.clone(),
            message,
        };
        let action: LeakAction = action.parse().map_err(invalid)?;
        let Some(source) = ContentSource::ALL.iter().find(|s| s.as_str() == name) else {
            let names: Vec<&str> = ContentSource::ALL.iter().map(|s| s.as_str()).collect();
            return Err(invalid(format!(
                "`{name}` is not a source; use {}",
                names.join(", ")
            )));
        };
        sources.by_source.insert(source.as_str(), action);
    }
    Ok(SafetyConfig { leaks, sources })
}
