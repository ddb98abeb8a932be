//! `[gateway.quic]`: the QUIC gateway for remote clients (`reef connect`): where it listens,
//! its certificate (configured PEM files, or the self-signed pair the HTTP API uses, made on
//! first start in `$REEF_HOME/tls/`), how many conversations one connection may hold and how
//! often a connection's tokens are checked again for revocation.

use crate::daemon::{TlsSource, TlsToml, resolve_tls};
use crate::error::ConfigError;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::Path;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GatewayToml {
    pub quic: Option<QuicToml>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QuicToml {
    pub listen: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
    pub max_streams: Option<u32>,
    pub recheck_secs: Option<u64>,
}

/// `[gateway]`: the daemon's doors beyond the HTTP API.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatewayConfig {
    /// `[gateway.quic]`; `None` when the table is absent (no QUIC listener).
    pub quic: Option<QuicConfig>,
}

/// `[gateway.quic]`, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuicConfig {
    /// The UDP address to listen on.
    pub listen: SocketAddr,
    /// The certificate: configured files, or the daemon's self-signed pair.
    pub tls: TlsSource,
    /// Conversations (bidirectional streams) one connection may have open at once.
    pub max_streams: u32,
    /// How often, in seconds, a connection's tokens are looked up again: a revoked token
    /// ends its connections within this time.
    pub recheck_secs: u64,
}

/// The default port of the QUIC gateway.
pub const DEFAULT_QUIC_PORT: u16 = 4433;

pub(crate) fn resolve(
    raw: GatewayToml,
    home: &Path,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<GatewayConfig, ConfigError> {
    let invalid = |key: &str, message: String| ConfigError::Invalid {
        origin: origin_of(key),
        key: key.into(),
        message,
    };
    let Some(quic) = raw.quic else {
        return Ok(GatewayConfig::default());
    };
    let listen_text = quic
        .listen
        .unwrap_or_else(|| format!("0.0.0.0:{DEFAULT_QUIC_PORT}"));
    let listen = listen_text.parse::<SocketAddr>().map_err(|e| {
        invalid(
            "gateway.quic.listen",
            format!("{listen_text:?} is not an address like 0.0.0.0:4433 ({e})"),
        )
    })?;
    let tls = TlsToml {
        self_signed: None,
        cert: quic.cert,
        key: quic.key,
    };
    let tls = resolve_tls(tls, home, "gateway.quic", &invalid)?.unwrap_or(TlsSource::SelfSigned);
    let max_streams = quic.max_streams.unwrap_or(256);
    if !(1..=10_000).contains(&max_streams) {
        return Err(invalid(
            "gateway.quic.max_streams",
            "must be between 1 and 10000".into(),
        ));
    }
    let recheck_secs = quic.recheck_secs.unwrap_or(5);
    if !(1..=3600).contains(&recheck_secs) {
        return Err(invalid(
            "gateway.quic.recheck_secs",
            "must be between 1 and 3600".into(),
        ));
    }
    Ok(GatewayConfig {
        quic: Some(QuicConfig {
            listen,
            tls,
            max_streams,
            recheck_secs,
        }),
    })
}
