//! QUIC endpoints: the gateway's (a certificate chain and key, TLS 1.3 with the `reef/1`
//! ALPN, enough concurrent streams for many conversations) and a client's, which trusts
//! exactly the certificate whose SHA-256 fingerprint it was given (and checks the handshake
//! signature with that certificate's key, so only its owner can answer).

use crate::protocol::ALPN;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest as _, Sha256};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long a silent connection lives.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a client pings so an idle conversation stays open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Why an endpoint could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The certificate and key do not make a TLS configuration.
    #[error("the certificate and key do not make a QUIC TLS configuration: {0}")]
    Tls(String),
    /// The fingerprint is not 32 bytes of hex.
    #[error("`{0}` is not a SHA-256 fingerprint: expected 64 hex digits, colons allowed (AB:CD:…)")]
    Fingerprint(String),
    /// The UDP socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// SHA-256 of `der`, as colon-separated upper-case hex (as `reef serve` prints it).
pub fn fingerprint(der: &[u8]) -> String {
    fingerprint_hex(&Sha256::digest(der).into())
}

/// 32 fingerprint bytes as `AB:CD:…`.
pub fn fingerprint_hex(bytes: &[u8; 32]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A fingerprint as given (`AB:CD:…`, `abcd…`), as its 32 bytes.
pub fn parse_fingerprint(text: &str) -> Result<[u8; 32], EndpointError> {
    let hex: String = text
        .trim()
        .chars()
        .filter(|c| *c != ':' && !c.is_whitespace())
        .collect();
    let bad = || EndpointError::Fingerprint(text.to_owned());
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn transport(max_streams: u32) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    transport.max_concurrent_bidi_streams(max_streams.into());
    transport.max_concurrent_uni_streams(0u8.into());
    transport.max_idle_timeout(quinn::IdleTimeout::try_from(IDLE_TIMEOUT).ok());
    transport.keep_alive_interval(Some(KEEP_ALIVE));
    transport
}

/// The gateway's endpoint on `addr`, serving `chain` with `key`, allowing `max_streams`
/// conversations per connection at once.
pub fn server(
    addr: SocketAddr,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    max_streams: u32,
) -> Result<quinn::Endpoint, EndpointError> {
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| EndpointError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| EndpointError::Tls(e.to_string()))?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| EndpointError::Tls(e.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport(max_streams)));
    quinn::Endpoint::server(config, addr).map_err(|source| EndpointError::Bind { addr, source })
}

/// What a pinned client saw of the server's certificate: the fingerprint of one it refused.
pub type Refused = Arc<std::sync::Mutex<Option<String>>>;

/// A client endpoint that trusts only the certificate with SHA-256 `pin`; a certificate it
/// refuses has its fingerprint put in `refused`.
pub fn client(pin: [u8; 32], refused: Refused) -> Result<quinn::Endpoint, EndpointError> {
    let provider = provider();
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| EndpointError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            pin,
            provider,
            refused,
        }))
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| EndpointError::Tls(e.to_string()))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport(0)));
    let any: SocketAddr = ([0, 0, 0, 0], 0).into();
    let mut endpoint =
        quinn::Endpoint::client(any).map_err(|source| EndpointError::Bind { addr: any, source })?;
    endpoint.set_default_client_config(config);
    Ok(endpoint)
}

/// Trusts the one certificate whose SHA-256 is `pin`, whatever name it carries: the pin
/// replaces the name check and the CA chain.
#[derive(Debug)]
struct Pinned {
    pin: [u8; 32],
    provider: Arc<CryptoProvider>,
    refused: Refused,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen: [u8; 32] = Sha256::digest(end_entity.as_ref()).into();
        if seen == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            let seen = fingerprint(end_entity.as_ref());
            *self
                .refused
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(seen.clone());
            Err(rustls::Error::General(format!(
                "the server's certificate has fingerprint {seen}, not the one pinned"
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
