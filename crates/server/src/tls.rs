//! TLS for the HTTP API (`[daemon.tls]`): the certificate and key from the configured PEM
//! files, or a self-signed pair made on first start in `$REEF_HOME/tls/` (kept, so its
//! fingerprint stays the one clients pinned), and a listener that completes handshakes off
//! the accept loop, so a client that stalls its handshake delays nobody else.

use reef_config::TlsSource;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client may take over its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why TLS could not be set up; each names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file holds no usable certificate or key.
    #[error("{path}: {message}")]
    Bad { path: PathBuf, message: String },
    /// Making the self-signed certificate failed.
    #[error("cannot make a self-signed certificate: {0}")]
    Generate(String),
    /// rustls refused the pair (a key that does not match the certificate, say).
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(String),
}

/// The daemon's certificate, ready to serve.
#[derive(Clone)]
pub struct TlsSetup {
    acceptor: TlsAcceptor,
    /// Where the certificate (chain) is: what a client pins or trusts.
    pub cert_path: PathBuf,
    /// SHA-256 of the leaf certificate's DER, as colon-separated upper-case hex.
    pub fingerprint: String,
    /// Whether the certificate was made just now.
    pub created: bool,
}

/// A certificate chain and its key, read (or made) and not yet served.
pub struct Material {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// Where the certificate (chain) is: what a client pins or trusts.
    pub cert_path: PathBuf,
    /// SHA-256 of the leaf certificate's DER, as colon-separated upper-case hex.
    pub fingerprint: String,
    /// Whether the certificate was made just now.
    pub created: bool,
}

/// The certificate and key of `source`: the configured files, or the self-signed pair under
/// `home` (made on first start for `names`, then reused). The HTTP API and the QUIC gateway
/// share the self-signed pair, so one fingerprint is pinned for both.
pub fn material(source: &TlsSource, home: &Path, names: &[String]) -> Result<Material, TlsError> {
    let cert_path = cert_path(source, home);
    let (key_path, created) = match source {
        TlsSource::Files { key, .. } => (key.clone(), false),
        TlsSource::SelfSigned => {
            let dir = home.join("tls");
            let (cert, key) = (cert_path.clone(), dir.join("key.pem"));
            let created = if cert.exists() || key.exists() {
                false
            } else {
                self_signed(&dir, &cert, &key, names)?;
                true
            };
            (key, created)
        }
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(&cert_path)?)
        .collect::<Result<_, _>>()
        .map_err(|e| bad(&cert_path, format!("not a PEM certificate ({e})")))?;
    let Some(leaf) = chain.first() else {
        return Err(bad(&cert_path, "holds no certificate".into()));
    };
    let fingerprint = fingerprint(leaf.as_ref());
    let key_text = read_key(&key_path)?;
    let key = PrivateKeyDer::from_pem_slice(&key_text)
        .map_err(|e| bad(&key_path, format!("not a PEM private key ({e})")))?;
    Ok(Material {
        chain,
        key,
        cert_path,
        fingerprint,
        created,
    })
}

/// The certificate for `source`, ready to serve the HTTP API (see [`material`]).
pub fn load(source: &TlsSource, home: &Path, names: &[String]) -> Result<TlsSetup, TlsError> {
    let Material {
        chain,
        key,
        cert_path,
        fingerprint,
        created,
    } = material(source, home, names)?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| TlsError::Config(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| TlsError::Config(e.to_string()))?;
    Ok(TlsSetup {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        cert_path,
        fingerprint,
        created,
    })
}

/// Where the certificate of `source` is for a daemon of `home`.
pub fn cert_path(source: &TlsSource, home: &Path) -> PathBuf {
    match source {
        TlsSource::Files { cert, .. } => cert.clone(),
        TlsSource::SelfSigned => home.join("tls").join("cert.pem"),
    }
}

/// The leaf certificate a local client pins to reach the daemon of `home` over TLS.
pub fn client_pin(source: &TlsSource, home: &Path) -> Result<CertificateDer<'static>, TlsError> {
    let path = cert_path(source, home);
    let text = read(&path)?;
    CertificateDer::pem_slice_iter(&text)
        .next()
        .ok_or_else(|| bad(&path, "holds no certificate".into()))?
        .map_err(|e| bad(&path, format!("not a PEM certificate ({e})")))
}

/// SHA-256 of `der`, as `AB:CD:…`.
pub fn fingerprint(der: &[u8]) -> String {
    reef_quic::fingerprint(der)
}

fn bad(path: &Path, message: String) -> TlsError {
    TlsError::Bad {
        path: path.to_path_buf(),
        message,
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// A private key file, refused when every user of the machine may read it.
fn read_key(path: &Path) -> Result<Vec<u8>, TlsError> {
    let mode = std::fs::metadata(path)
        .map_err(|source| TlsError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .mode();
    if mode & 0o004 != 0 {
        return Err(bad(
            path,
            format!(
                "the private key is readable by every user (mode {:o}); run `chmod 600 {}`",
                mode & 0o777,
                path.display()
            ),
        ));
    }
    read(path)
}

/// Makes a key and a certificate for `names` (plus the loopback names), with rcgen's open
/// validity (clients pin it rather than trust a date), written 0600 and never over an existing file.
fn self_signed(dir: &Path, cert: &Path, key: &Path, names: &[String]) -> Result<(), TlsError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TlsError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut alt: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .map(String::from)
        .collect();
    for name in names {
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        if !bare.is_empty() && !alt.iter().any(|a| a == bare) {
            alt.push(bare.to_owned());
        }
    }
    let mut params =
        rcgen::CertificateParams::new(alt).map_err(|e| TlsError::Generate(e.to_string()))?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "reef daemon");
    let pair = rcgen::KeyPair::generate().map_err(|e| TlsError::Generate(e.to_string()))?;
    let made = params
        .self_signed(&pair)
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    // The key first: a certificate without its key would be taken as a finished pair.
    write_new(key, pair.serialize_pem().as_bytes()).map_err(io(key))?;
    write_new(cert, made.pem().as_bytes()).map_err(io(cert))?;
    Ok(())
}

fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// A TCP listener whose connections are TLS streams; handshakes run in their own tasks.
pub(crate) struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    pub(crate) fn new(tcp: TcpListener, setup: &TlsSetup) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (done, ready) = mpsc::channel(64);
        let acceptor = setup.acceptor.clone();
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!(error = %err, "cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if let Err(err) = stream.set_nodelay(true) {
                    tracing::debug!(%err, "cannot set TCP_NODELAY");
                }
                let acceptor = acceptor.clone();
                let handed = done.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            // The server has stopped when nobody receives.
                            let _closed = handed.send((tls, peer)).await;
                        }
                        Ok(Err(err)) => {
                            tracing::debug!(%peer, error = %err, "TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
                if done.is_closed() {
                    return;
                }
            }
        });
        Ok(TlsListener { local, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept task ends only with the server; wait for the shutdown.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
