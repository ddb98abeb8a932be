//! `[daemon]` and `[approvals]`: where `reef serve` listens, how many turns run at once, how
//! much event history is kept, how long operator questions wait, what happens to a message
//! that arrives mid-turn, which shell commands need the operator's approval, and whether
//! `/metrics` is open without the token (`[metrics]`), and whether the dashboard offers a
//! terminal (`[dashboard]`); the HTTP API's names, rate limits and TLS.

use crate::error::ConfigError;
use reef_core::QueueMode;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DaemonToml {
    pub listen: Option<String>,
    pub max_concurrent_turns: Option<usize>,
    pub event_history: Option<u64>,
    pub question_ttl_secs: Option<u64>,
    pub request_timeout_secs: Option<u64>,
    /// A `reef_core::QueueMode` name, parsed in `resolve`.
    pub queue_mode: Option<String>,
    pub hosts: Option<Vec<String>>,
    pub rate_limit: Option<u32>,
    pub root_rate_limit: Option<u32>,
    pub tls: Option<TlsToml>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TlsToml {
    pub cert: Option<String>,
    pub key: Option<String>,
    pub self_signed: Option<bool>,
}

/// `[daemon.tls]`: where the HTTP API's certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsSource {
    /// A certificate chain and its private key, PEM files.
    Files { cert: PathBuf, key: PathBuf },
    /// Made on first start and kept in `$REEF_HOME/tls/`; its fingerprint is printed.
    SelfSigned,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MetricsToml {
    pub public: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DashboardToml {
    pub terminal: Option<bool>,
}

/// `[dashboard]`: the web dashboard's optional parts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DashboardConfig {
    /// The operator may open a shell inside an agent's sandbox from the agent's page; off by
    /// default.
    pub terminal: bool,
}

/// `[metrics]`: the Prometheus endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `GET /metrics` answers without the bearer token (for a scraper that cannot hold
    /// one); off by default.
    pub public: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalsToml {
    pub dangerous: Option<Vec<String>>,
    pub allow: Option<Vec<String>>,
}

/// How the daemon runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonConfig {
    /// The HTTP API's address (loopback by default).
    pub listen: SocketAddr,
    /// Turns running at the same time across all agents.
    pub max_concurrent_turns: usize,
    /// Events kept in the history; older ones are pruned.
    pub event_history: u64,
    /// Default time-to-live of an operator question or approval.
    pub question_ttl_secs: u64,
    /// Default time an agent waits for a reply to a request.
    pub request_timeout_secs: u64,
    /// What happens to a message for an agent that is in the middle of a turn (default
    /// followup: it runs as the next turn).
    pub queue_mode: QueueMode,
    /// Names (`name` or `name:port`) the daemon answers to besides its listen address and,
    /// on loopback or every address, the loopback names; a request addressed to any other
    /// `Host` is refused (DNS rebinding).
    pub hosts: Vec<String>,
    /// Requests per minute for each token made with `reef token create` that does not set
    /// its own; `None`: no limit.
    pub rate_limit: Option<u32>,
    /// Requests per minute for the root token in `$REEF_HOME/api-token`; `None` (the
    /// default): no limit.
    pub root_rate_limit: Option<u32>,
    /// TLS for the HTTP API; `None`: plain HTTP.
    pub tls: Option<TlsSource>,
}

/// Which shell commands wait for the operator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalsConfig {
    /// Dangerous patterns; `None` uses reef's built-in list.
    pub dangerous: Option<Vec<String>>,
    /// Allow rules such as `shell(git *)`.
    pub allow: Vec<String>,
}

pub(crate) fn resolve(
    raw: DaemonToml,
    home: &Path,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<DaemonConfig, ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        origin: origin_of(key),
        key: key.into(),
        message,
    };
    let listen_text = raw.listen.unwrap_or_else(|| "127.0.0.1:7447".into());
    let listen = listen_text.parse::<SocketAddr>().map_err(|e| {
        invalid(
            "daemon.listen",
            format!("{listen_text:?} is not an address like 127.0.0.1:7447 ({e})"),
        )
    })?;
    let max_concurrent_turns = raw.max_concurrent_turns.unwrap_or(4);
    if max_concurrent_turns == 0 {
        return Err(invalid(
            "daemon.max_concurrent_turns",
            "must be at least 1".into(),
        ));
    }
    let event_history = raw.event_history.unwrap_or(100_000);
    if event_history < 100 {
        return Err(invalid(
            "daemon.event_history",
            "must be at least 100".into(),
        ));
    }
    let question_ttl_secs = raw.question_ttl_secs.unwrap_or(86_400);
    let request_timeout_secs = raw.request_timeout_secs.unwrap_or(600);
    for (key, value) in [
        ("daemon.question_ttl_secs", question_ttl_secs),
        ("daemon.request_timeout_secs", request_timeout_secs),
    ] {
        // 30 days: longer waits are almost certainly a unit mistake.
        if !(1..=2_592_000).contains(&value) {
            return Err(invalid(
                key,
                "must be between 1 and 2592000 (30 days)".into(),
            ));
        }
    }
    let queue_mode = match raw.queue_mode.as_deref() {
        None => QueueMode::default(),
        Some(name) => QueueMode::parse(name).ok_or_else(|| {
            invalid(
                "daemon.queue_mode",
                format!(
                    "unknown mode `{name}` (expected one of: {})",
                    QueueMode::ALL.map(QueueMode::as_str).join(", ")
                ),
            )
        })?,
    };
    let hosts = raw
        .hosts
        .unwrap_or_default()
        .into_iter()
        .map(|host| {
            check_host(&host)
                .map(|()| host.to_ascii_lowercase())
                .map_err(|message| invalid("daemon.hosts", message))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // 0 means no limit.
    let rate_limit = match raw.rate_limit {
        None => Some(600),
        Some(0) => None,
        Some(n) => Some(n),
    };
    let root_rate_limit = raw.root_rate_limit.filter(|n| *n > 0);
    let tls = raw
        .tls
        .map(|tls| resolve_tls(tls, home, "daemon.tls", &invalid))
        .transpose()?
        .flatten();
    Ok(DaemonConfig {
        listen,
        max_concurrent_turns,
        event_history,
        question_ttl_secs,
        request_timeout_secs,
        queue_mode,
        hosts,
        rate_limit,
        root_rate_limit,
        tls,
    })
}

/// A `Host` value: a DNS name or an IP address, and an optional port; no scheme or path.
fn check_host(host: &str) -> Result<(), String> {
    if host.contains('/') {
        return Err(format!(
            "{host:?} is not a host name but a URL; give the name alone, like reef.example.com \
             or reef.example.com:7447"
        ));
    }
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) if !name.ends_with(':') && !port.contains(']') => (name, Some(port)),
        _ => (host, None),
    };
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err(format!("{host:?}: `{port}` is not a port"));
    }
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    let fine = !bare.is_empty()
        && (bare.parse::<std::net::IpAddr>().is_ok()
            || bare
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'));
    if fine {
        Ok(())
    } else {
        Err(format!(
            "{host:?} is not a host name like reef.example.com or reef.example.com:7447"
        ))
    }
}

/// The certificate source of a `[….tls]` table at `table` (`daemon.tls`, say).
pub(crate) fn resolve_tls(
    raw: TlsToml,
    home: &Path,
    table: &str,
    invalid: &dyn Fn(&str, String) -> ConfigError,
) -> Result<Option<TlsSource>, ConfigError> {
    let key = |name: &str| format!("{table}.{name}");
    let path = |key: &str, text: String| {
        if text.is_empty() {
            return Err(invalid(key, "must not be empty".into()));
        }
        let path = PathBuf::from(text);
        Ok(if path.is_absolute() {
            path
        } else {
            home.join(path)
        })
    };
    match (raw.cert, raw.key, raw.self_signed.unwrap_or(false)) {
        (Some(_), _, true) | (_, Some(_), true) => Err(invalid(
            &key("self_signed"),
            "give either cert and key, or self_signed = true, not both".into(),
        )),
        (Some(cert), Some(key_file), false) => Ok(Some(TlsSource::Files {
            cert: path(&key("cert"), cert)?,
            key: path(&key("key"), key_file)?,
        })),
        (Some(_), None, false) => Err(invalid(
            &key("key"),
            "missing: a certificate needs its private key".into(),
        )),
        (None, Some(_), false) => Err(invalid(
            &key("cert"),
            "missing: a private key needs its certificate".into(),
        )),
        (None, None, true) => Ok(Some(TlsSource::SelfSigned)),
        (None, None, false) => Ok(None),
    }
}

pub(crate) fn resolve_approvals(raw: ApprovalsToml) -> ApprovalsConfig {
    ApprovalsConfig {
        dangerous: raw.dangerous,
        allow: raw.allow.unwrap_or_default(),
    }
}
