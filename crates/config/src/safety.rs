//! `[safety]`: what the leak detector does with each kind of credential it finds in what is
//! about to leave reef (`[safety.leaks]`: `default`, `secret`, or a pattern id, each
//! `ignore`, `warn`, `sanitize` or `block`).

use crate::error::ConfigError;
use reef_security::leak::{LeakAction, LeakPolicy};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SafetyToml {
    #[serde(default)]
    pub leaks: BTreeMap<String, String>,
}

/// The resolved `[safety]` section.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SafetyConfig {
    /// The action for each kind of leak finding.
    pub leaks: LeakPolicy,
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
    Ok(SafetyConfig { leaks })
}
