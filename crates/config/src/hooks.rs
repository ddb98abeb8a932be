//! `[hooks]`: inbound webhooks at `POST /hooks/NAME`. Each `[hooks.NAME]` names the
//! `[secrets]` entry its senders sign with and where a delivery goes; `[hooks] max_body`
//! bounds a delivery's size.

use crate::error::ConfigError;
use crate::sandbox::ByteSize;
use reef_core::SecretSpec;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct HooksToml {
    pub max_body: Option<ByteSize>,
    #[serde(flatten)]
    pub named: BTreeMap<String, HookToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HookToml {
    /// A `[secrets]` name: the HMAC key senders sign with.
    pub secret: Option<String>,
    /// `agent:NAME` or `spawn-once:TEMPLATE`.
    pub route: Option<String>,
}

/// Every webhook, and the size limit they share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HooksConfig {
    /// The largest body accepted, in bytes (larger: 413).
    pub max_body: u64,
    pub hooks: BTreeMap<String, HookConfig>,
}

impl Default for HooksConfig {
    fn default() -> Self {
        Self {
            max_body: DEFAULT_MAX_BODY,
            hooks: BTreeMap::new(),
        }
    }
}

/// One webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookConfig {
    pub name: String,
    /// The `[secrets]` entry holding the HMAC key.
    pub secret: String,
    pub route: HookRoute,
}

/// Where a delivery goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookRoute {
    /// A message to an existing agent.
    Agent(String),
    /// The task of a new agent from this template, destroyed when it is done.
    SpawnOnce(String),
    /// A fire of this routine (its `webhook` names the hook).
    Routine(String),
}

/// `[hooks] max_body` when not set: 1 MiB.
pub const DEFAULT_MAX_BODY: u64 = 1024 * 1024;

/// `routed` maps a hook to the routine whose `webhook` names it.
pub(crate) fn resolve(
    raw: HooksToml,
    secrets: &[SecretSpec],
    routed: &BTreeMap<String, String>,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<HooksConfig, ConfigError> {
    let invalid = |key: String, message: String| ConfigError::Invalid {
        origin: origin_of(&key),
        key,
        message,
    };
    let max_body = raw.max_body.map_or(DEFAULT_MAX_BODY, |b| b.0);
    if !(1..=64 * 1024 * 1024).contains(&max_body) {
        return Err(invalid(
            "hooks.max_body".into(),
            "must be between 1 byte and 64M".into(),
        ));
    }
    let mut hooks = BTreeMap::new();
    for (name, hook) in raw.named {
        let key = |field: &str| format!("hooks.{name}.{field}");
        if !plain(&name) {
            return Err(invalid(
                format!("hooks.{name}"),
                "a hook's name is part of its URL: use 1-64 of a-z, 0-9, - and _".into(),
            ));
        }
        let secret = hook.secret.ok_or_else(|| {
            invalid(
                key("secret"),
                "missing; name a [secrets] entry whose value senders sign with".into(),
            )
        })?;
        if !secrets.iter().any(|s| s.name == secret) {
            return Err(invalid(
                key("secret"),
                format!("names `{secret}`, but no [secrets.{secret}] is defined"),
            ));
        }
        let route = match (hook.route, routed.get(&name)) {
            (None, Some(routine)) => {
                hooks.insert(
                    name.clone(),
                    HookConfig {
                        name,
                        secret,
                        route: HookRoute::Routine(routine.clone()),
                    },
                );
                continue;
            }
            (Some(_), Some(routine)) => {
                return Err(invalid(
                    key("route"),
                    format!("[routines.{routine}] is fired by this hook; remove `route`"),
                ));
            }
            (Some(route), None) => route,
            (None, None) => {
                return Err(invalid(
                    key("route"),
                    "missing; e.g. \"agent:ada\", or name this hook in a routine's `webhook`"
                        .into(),
                ));
            }
        };
        let route = match route.split_once(':') {
            Some(("agent", name)) if plain(name) => HookRoute::Agent(name.to_owned()),
            Some(("spawn-once", template)) if plain(template) => {
                HookRoute::SpawnOnce(template.to_owned())
            }
            _ => {
                return Err(invalid(
                    key("route"),
                    format!(
                        "`{route}` is not a route; use \"agent:NAME\" or \"spawn-once:TEMPLATE\""
                    ),
                ));
            }
        };
        hooks.insert(
            name.clone(),
            HookConfig {
                name,
                secret,
                route,
            },
        );
    }
    Ok(HooksConfig { max_body, hooks })
}

fn plain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}
