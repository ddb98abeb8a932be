//! Outbound HTTP plumbing for `http_fetch`: the rustls configuration (ring provider, native
//! roots, no global provider) and per-hop clients pinned to SSRF-checked addresses.

use reef_core::ToolError;
use reef_security::SsrfPolicy;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use url::{Host, Url};

/// Builds the TLS client configuration: ring crypto, roots from the platform store.
pub(crate) fn tls_config() -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for err in &native.errors {
        tracing::debug!(%err, "error loading a native root certificate");
    }
    let (added, ignored) = roots.add_parsable_certificates(native.certs);
    if added == 0 {
        tracing::warn!(
            ignored,
            "no native root certificates found; https fetches will fail"
        );
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS setup failed: {err}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Checks `url` against `policy`, resolves its host and checks every resolved address, then
/// builds a client that can only connect to those checked addresses (no re-resolution, so
/// DNS rebinding between check and connect is impossible), with redirects and proxies off.
pub(crate) async fn pinned_client(
    policy: &SsrfPolicy,
    url: &Url,
    tls: &rustls::ClientConfig,
    timeout: Duration,
) -> Result<reqwest::Client, ToolError> {
    policy
        .check_url(url)
        .map_err(|err| ToolError::Denied(err.to_string()))?;
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls.clone())
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .user_agent(concat!("reef/", env!("CARGO_PKG_VERSION")));

    if let Some(Host::Domain(domain)) = url.host() {
        let port = url.port_or_known_default().unwrap_or(80);
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((domain, port))
            .await
            .map_err(|err| ToolError::Failed(format!("could not resolve host {domain}: {err}")))?
            .collect();
        let ips: Vec<_> = addrs.iter().map(SocketAddr::ip).collect();
        policy
            .check_resolved(domain, &ips)
            .map_err(|err| ToolError::Denied(err.to_string()))?;
        builder = builder.resolve_to_addrs(domain, &addrs);
    }
    builder
        .build()
        .map_err(|err| ToolError::Failed(format!("could not build the HTTP client: {err}")))
}

/// Reads a response body, keeping at most `max` bytes. Returns the bytes and whether the
/// body was longer.
pub(crate) async fn read_capped(
    mut resp: reqwest::Response,
    max: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        let room = max - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// A reqwest error with its source chain, for messages.
pub(crate) fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
