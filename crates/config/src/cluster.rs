//! `[cluster]`: cluster mode's engines (PostgreSQL for state, NATS JetStream for the bus) and
//! this node's place among the others: its name, how long its leases last, how many agents it
//! runs at most.

use crate::error::ConfigError;
use crate::secret::Secret;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// `cluster.lease_secs` when not set.
pub const DEFAULT_LEASE_SECS: u64 = 5;

/// The longest lease: a dead node's agents wait this long before they move.
const MAX_LEASE_SECS: u64 = 3600;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClusterToml {
    pub enabled: Option<bool>,
    pub database_url: Option<String>,
    /// The environment variable holding the database password (never the URL: `reef config`
    /// shows the URL).
    pub password_env: Option<String>,
    pub nats_url: Option<String>,
    pub node_name: Option<String>,
    pub lease_secs: Option<u64>,
    pub max_agents_per_node: Option<u64>,
}

/// `[cluster]`, when it is enabled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// `postgres://user@host:port/database`, without a password.
    pub database_url: String,
    /// The password, from `password_env`.
    pub database_password: Option<Secret>,
    /// `nats://host:port` (or `tls://`).
    pub nats_url: String,
    /// This node's name, unique among live nodes (default: the machine's host name).
    pub node_name: String,
    /// How long an agent's lease lasts without a renewal (default 5 s).
    pub lease: Duration,
    /// The most agents this node runs; `None` is no limit.
    pub max_agents: Option<u64>,
}

pub(crate) fn resolve(
    raw: Option<ClusterToml>,
    env: &BTreeMap<String, String>,
    host_name: &dyn Fn() -> Option<String>,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<Option<ClusterConfig>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let invalid = |field: &str, message: String| {
        let key = format!("cluster.{field}");
        ConfigError::Invalid {
            origin: origin_of(&key),
            key,
            message,
        }
    };
    if raw.enabled != Some(true) {
        return Ok(None);
    }
    let database_url = raw.database_url.ok_or_else(|| {
        invalid(
            "database_url",
            "missing; cluster mode keeps its state in PostgreSQL, e.g. \
             \"postgres://reef@db.internal:5432/reef\""
                .into(),
        )
    })?;
    check_database_url(&database_url).map_err(|m| invalid("database_url", m))?;
    let database_password = match raw.password_env {
        None => None,
        Some(name) => match env.get(&name) {
            Some(value) if !value.is_empty() => Some(Secret::new(value.clone())),
            _ => {
                return Err(invalid(
                    "password_env",
                    format!("names ${name}, which is not set (or empty)"),
                ));
            }
        },
    };
    let nats_url = raw.nats_url.ok_or_else(|| {
        invalid(
            "nats_url",
            "missing; cluster mode's bus is NATS JetStream, e.g. \"nats://nats.internal:4222\""
                .into(),
        )
    })?;
    check_nats_url(&nats_url).map_err(|m| invalid("nats_url", m))?;
    let node_name = match raw.node_name {
        Some(name) => name,
        None => host_name().ok_or_else(|| {
            invalid(
                "node_name",
                "missing, and the machine's host name cannot be read; name this node".into(),
            )
        })?,
    };
    check_node_name(&node_name).map_err(|m| invalid("node_name", m))?;
    let lease_secs = raw.lease_secs.unwrap_or(DEFAULT_LEASE_SECS);
    if !(1..=MAX_LEASE_SECS).contains(&lease_secs) {
        return Err(invalid(
            "lease_secs",
            format!("{lease_secs} is out of range: 1 to {MAX_LEASE_SECS} seconds"),
        ));
    }
    if raw.max_agents_per_node == Some(0) {
        return Err(invalid(
            "max_agents_per_node",
            "0 would let this node run no agent; leave it out for no limit".into(),
        ));
    }
    Ok(Some(ClusterConfig {
        database_url,
        database_password,
        nats_url,
        node_name,
        lease: Duration::from_secs(lease_secs),
        max_agents: raw.max_agents_per_node,
    }))
}

/// The machine's host name, the default node name.
pub(crate) fn host_name() -> Option<String> {
    let name = rustix::system::uname().nodename().to_str().ok()?.to_owned();
    (!name.is_empty()).then_some(name)
}

/// A PostgreSQL URL without a password (`reef config` shows the URL; the password comes from
/// `password_env`).
fn check_database_url(url: &str) -> Result<(), String> {
    let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    else {
        return Err(format!(
            "\"{url}\" is not a PostgreSQL URL (postgres://user@host:port/database)"
        ));
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    if let Some((user, _)) = authority.rsplit_once('@')
        && user.contains(':')
    {
        return Err(
            "holds a password; put it in an environment variable and name that in \
             cluster.password_env"
                .into(),
        );
    }
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() {
        return Err(format!("\"{url}\" names no host"));
    }
    let path = rest[authority.len()..].trim_start_matches('/');
    if path.split('?').next().unwrap_or_default().is_empty() {
        return Err(format!("\"{url}\" names no database (…/reef)"));
    }
    Ok(())
}

/// `nats://host:port` or `tls://host:port`.
fn check_nats_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("nats://")
        .or_else(|| url.strip_prefix("tls://"))
        .ok_or_else(|| format!("\"{url}\" is not a NATS URL (nats://host:port)"))?;
    if rest.trim_end_matches('/').is_empty() {
        return Err(format!("\"{url}\" names no host"));
    }
    Ok(())
}

/// 1 to 63 letters, digits, `.`, `_` or `-` (a host name's label set, and safe in subjects).
fn check_node_name(name: &str) -> Result<(), String> {
    let fits = (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if fits {
        Ok(())
    } else {
        Err(format!(
            "\"{name}\" is not a node name: 1 to 63 letters, digits, '.', '_' or '-'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{check_database_url, check_nats_url, check_node_name};

    #[test]
    fn urls_and_names_are_checked_with_a_reason() {
        assert!(check_database_url("postgres://reef@db:5432/reef").is_ok());
        assert!(check_database_url("postgresql://db/reef?sslmode=require").is_ok());
        let password = check_database_url("postgres://reef:hunter2@db/reef").unwrap_err();
        assert!(password.contains("password_env"), "{password}");
        assert!(check_database_url("mysql://db/reef").is_err());
        assert!(check_database_url("postgres://reef@/reef").is_err());
        assert!(check_database_url("postgres://reef@db:5432").is_err());
        assert!(check_database_url("postgres://reef@db:5432/").is_err());
        assert!(check_nats_url("nats://127.0.0.1:4222").is_ok());
        assert!(check_nats_url("tls://nats.internal").is_ok());
        assert!(check_nats_url("http://nats").is_err() && check_nats_url("nats://").is_err());
        assert!(check_node_name("node-1.eu_west").is_ok());
        for bad in ["", "a b", "n/1", "ünï", &"x".repeat(64)] {
            assert!(check_node_name(bad).is_err(), "{bad}");
        }
    }
}
