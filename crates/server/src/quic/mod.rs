//! The QUIC gateway (`[gateway.quic]`): remote clients (`reef connect`) hold conversations
//! with agents over QUIC, one bidirectional stream each, authenticated by the same tokens as
//! the HTTP API (checked per stream, counted against the same per-minute limits, and looked
//! up again every `recheck_secs`: a revoked token ends every connection that used it).
//! [`conversation`] serves one stream.

use crate::auth::Keys;
use crate::tls::{self, Material, TlsError};
use reef_quic::protocol::close;
use reef_runtime::{ChannelState, ChannelStatus, Runtime};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

mod conversation;

/// Why the gateway could not start; each names what to fix.
#[derive(Debug, thiserror::Error)]
pub enum QuicError {
    #[error("gateway.quic certificate: {0}")]
    Tls(#[from] TlsError),
    #[error("gateway.quic: {0}")]
    Endpoint(#[from] reef_quic::EndpointError),
}

/// A bound gateway, not yet serving.
pub struct QuicGateway {
    endpoint: quinn::Endpoint,
    shared: Arc<Shared>,
    /// The address it listens on (the port chosen when the configuration said 0).
    pub addr: SocketAddr,
    /// The certificate's SHA-256, for `reef connect --fingerprint`.
    pub fingerprint: String,
    pub cert_path: PathBuf,
    /// Whether the self-signed certificate was made just now.
    pub created: bool,
}

/// The gateway's name on the runtime's channel board (`reef channels status`): the name
/// of its configuration table, which no `[channels.NAME]` can take unquoted.
pub const BOARD_NAME: &str = "gateway.quic";

/// What every connection of the gateway works with.
struct Shared {
    runtime: Runtime,
    keys: Keys,
    recheck: Duration,
    /// Client connections open now.
    connections: AtomicUsize,
}

/// The tokens one connection has used, by hash (the root token under `root`), with their
/// names: looked up again until the connection ends.
type Used = Arc<Mutex<HashMap<String, String>>>;

impl QuicGateway {
    /// Binds the gateway `[gateway.quic]` configures, or `None` when it is not configured.
    /// `root` is the daemon's root API token; `names` are the names a self-signed
    /// certificate is made for.
    pub fn bind(
        runtime: &Runtime,
        root: &str,
        home: &Path,
        names: &[String],
    ) -> Result<Option<QuicGateway>, QuicError> {
        let Some(config) = runtime.config().gateway.quic.clone() else {
            return Ok(None);
        };
        let Material {
            chain,
            key,
            cert_path,
            fingerprint,
            created,
        } = tls::material(&config.tls, home, names)?;
        let endpoint = reef_quic::endpoint::server(config.listen, chain, key, config.max_streams)?;
        let addr = endpoint
            .local_addr()
            .map_err(|source| reef_quic::EndpointError::Bind {
                addr: config.listen,
                source,
            })?;
        Ok(Some(QuicGateway {
            endpoint,
            shared: Arc::new(Shared {
                runtime: runtime.clone(),
                keys: Keys::new(root, &runtime.config().daemon),
                recheck: Duration::from_secs(config.recheck_secs),
                connections: AtomicUsize::new(0),
            }),
            addr,
            fingerprint,
            cert_path,
            created,
        }))
    }

    /// Serves connections until `shutdown` completes, then closes them. The gateway is on
    /// the channel board while it serves: up, its connections, messages in and answers out.
    pub async fn serve(self, shutdown: impl std::future::Future<Output = ()> + Send) {
        self.shared
            .runtime
            .report_channel(ChannelStatus {
                name: BOARD_NAME.to_owned(),
                kind: "quic".to_owned(),
                target: self.addr.to_string(),
                state: ChannelState::Up,
                since_unix: reef_store::unix_now(),
                error: None,
                failures: 0,
                next_attempt_unix: None,
                connected: 0,
                queued: 0,
                reconnects: 0,
                messages_in: 0,
                messages_out: 0,
            })
            .await;
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                incoming = self.endpoint.accept() => match incoming {
                    Some(incoming) => {
                        tokio::spawn(connection(self.shared.clone(), incoming));
                    }
                    None => break,
                },
                () = &mut shutdown => break,
            }
        }
        self.endpoint
            .close(close::SHUTDOWN.into(), b"reef is shutting down");
        self.endpoint.wait_idle().await;
    }
}

/// One client connection: its streams, each a conversation, and the watch on its tokens.
async fn connection(shared: Arc<Shared>, incoming: quinn::Incoming) {
    let remote = incoming.remote_address();
    let connection = match incoming.await {
        Ok(connection) => connection,
        Err(err) => {
            tracing::debug!(%remote, error = %err, "a QUIC handshake failed");
            return;
        }
    };
    tracing::debug!(%remote, "a QUIC client connected");
    let open = shared.connections.fetch_add(1, Ordering::Relaxed) + 1;
    shared.runtime.channel_counts(BOARD_NAME, open, 0);
    let used = Used::default();
    let watch = tokio::spawn(watch_tokens(
        shared.clone(),
        connection.clone(),
        used.clone(),
    ));
    while let Ok((send, recv)) = connection.accept_bi().await {
        tokio::spawn(conversation::serve(
            shared.clone(),
            used.clone(),
            remote,
            send,
            recv,
        ));
    }
    watch.abort();
    let open = shared.connections.fetch_sub(1, Ordering::Relaxed) - 1;
    shared.runtime.channel_counts(BOARD_NAME, open, 0);
}

/// Looks up the tokens `used` on `connection` every `recheck`; closes the connection when
/// one was revoked (or is gone).
async fn watch_tokens(shared: Arc<Shared>, connection: quinn::Connection, used: Used) {
    loop {
        tokio::time::sleep(shared.recheck).await;
        let tokens: Vec<(String, String)> = used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(hash, name)| (hash.clone(), name.clone()))
            .collect();
        for (hash, name) in tokens {
            if hash == conversation::ROOT {
                continue;
            }
            let valid = match shared.runtime.store().api_token_by_hash(&hash).await {
                Ok(found) => found.is_some_and(|t| t.revoked_at.is_none()),
                Err(err) => {
                    // Unknown now; the next look decides.
                    tracing::warn!(error = %err, "cannot look up a QUIC connection's token");
                    true
                }
            };
            if !valid {
                tracing::info!(token = %name, "a revoked token ends its QUIC connection");
                connection.close(
                    close::REVOKED.into(),
                    format!("token `{name}` was revoked").as_bytes(),
                );
                return;
            }
        }
    }
}
