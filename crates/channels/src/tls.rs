//! TLS for the channels' own connections (IRC, the Discord gateway, Slack's Socket Mode):
//! rustls on ring, checking servers against the system's roots or given ones.

use reef_core::ChannelError;
use std::sync::Arc;

/// A client configuration trusting `roots`, or the system's when `None`.
pub(crate) fn client_config(
    roots: Option<rustls::RootCertStore>,
) -> Result<rustls::ClientConfig, ChannelError> {
    let roots = match roots {
        Some(roots) => roots,
        None => {
            let mut roots = rustls::RootCertStore::empty();
            let native = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(native.certs);
            if added == 0 {
                return Err(ChannelError::Refused(
                    "TLS is on, but the system has no root certificates to check the server's"
                        .into(),
                ));
            }
            roots
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ChannelError::Invalid(format!("TLS setup: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
