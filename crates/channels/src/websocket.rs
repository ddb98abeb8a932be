//! A WebSocket client for the platforms whose events come over one (the Discord gateway,
//! Slack's Socket Mode): `ws://` in the clear (a test's fake on loopback) or `wss://` over
//! rustls, with the frames' size bounded.

use futures::{SinkExt, StreamExt};
use reef_core::ChannelError;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};

/// The largest message reef takes from a platform (Discord's READY for a large bot is a few
/// MB).
const MAX_MESSAGE: usize = 16 << 20;
/// How long opening the connection (TCP, TLS, the upgrade) may take.
const OPEN_WAIT: Duration = Duration::from_secs(30);

pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// An open WebSocket.
pub(crate) type Socket = WebSocketStream<Box<dyn Io>>;

/// What came over a socket.
#[derive(Debug)]
pub(crate) enum Incoming {
    Text(String),
    /// The peer closed, with its code (1005 when it gave none) and reason.
    Closed(u16, String),
}

/// Opens `url` (`ws://` or `wss://`).
pub(crate) async fn open(url: &str) -> Result<Socket, ChannelError> {
    tokio::time::timeout(OPEN_WAIT, open_now(url))
        .await
        .map_err(|_| ChannelError::Connection(format!("{}: no answer in 30 s", shown(url))))?
}

async fn open_now(url: &str) -> Result<Socket, ChannelError> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("wss://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("ws://") {
        (false, rest)
    } else {
        return Err(ChannelError::Invalid(format!(
            "`{}` is not a WebSocket URL",
            shown(url)
        )));
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let (host, port) = authority_of(authority, if tls { 443 } else { 80 })
        .ok_or_else(|| ChannelError::Invalid(format!("`{}` names no host and port", shown(url))))?;
    let tcp = TcpStream::connect((host, port))
        .await
        .map_err(|e| ChannelError::Connection(format!("cannot connect to {host}:{port}: {e}")))?;
    if let Err(err) = tcp.set_nodelay(true) {
        tracing::debug!(%err, "cannot set TCP_NODELAY");
    }
    let stream: Box<dyn Io> = if tls {
        let config = Arc::new(crate::tls::client_config(None)?);
        let name = rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|e| {
            ChannelError::Invalid(format!("`{host}` is not a TLS server name: {e}"))
        })?;
        let stream = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| {
                ChannelError::Connection(format!("TLS handshake with {host}:{port} failed: {e}"))
            })?;
        Box::new(stream)
    } else {
        Box::new(tcp)
    };
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    let (socket, _response) =
        tokio_tungstenite::client_async_with_config(url, stream, Some(config))
            .await
            .map_err(|e| {
                ChannelError::Connection(format!("WebSocket upgrade at {} failed: {e}", shown(url)))
            })?;
    Ok(socket)
}

/// The next text message (pings are answered by the library; binary frames are skipped),
/// or how the socket ended.
pub(crate) async fn next(socket: &mut Socket) -> Result<Incoming, ChannelError> {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => return Ok(Incoming::Text(text.as_str().to_owned())),
            Some(Ok(Message::Close(frame))) => {
                return Ok(match frame {
                    Some(frame) => {
                        Incoming::Closed(u16::from(frame.code), frame.reason.to_string())
                    }
                    None => Incoming::Closed(1005, String::new()),
                });
            }
            Some(Ok(Message::Binary(_))) => {
                tracing::debug!("skipping a binary WebSocket message");
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
            Some(Err(e)) => return Err(ChannelError::Connection(format!("WebSocket: {e}"))),
            None => return Err(ChannelError::Connection("the WebSocket ended".into())),
        }
    }
}

/// Sends `text`.
pub(crate) async fn send(socket: &mut Socket, text: String) -> Result<(), ChannelError> {
    socket
        .send(Message::text(text))
        .await
        .map_err(|e| ChannelError::Connection(format!("WebSocket: {e}")))
}

/// Closes with `code` and `reason`, not waiting long for the peer.
pub(crate) async fn close(socket: &mut Socket, code: u16, reason: &str) {
    let frame = CloseFrame {
        code: code.into(),
        reason: reason.to_owned().into(),
    };
    let closing = async {
        socket.close(Some(frame)).await?;
        // Read until the peer's close arrives.
        while let Some(Ok(_)) = socket.next().await {}
        Ok::<(), tokio_tungstenite::tungstenite::Error>(())
    };
    match tokio::time::timeout(Duration::from_secs(2), closing).await {
        Ok(Ok(())) | Err(_) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "closing a WebSocket"),
    }
}

/// `host`, `host:port` or `[v6]:port`, with `default` as the port when none is given.
fn authority_of(authority: &str, default: u16) -> Option<(&str, u16)> {
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        match after.strip_prefix(':') {
            Some(port) => (host, port.parse().ok()?),
            None if after.is_empty() => (host, default),
            None => return None,
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, port.parse().ok()?),
            None => (authority, default),
        }
    };
    (!host.is_empty() && port > 0).then_some((host, port))
}

/// `url` without its query (where a platform may put a ticket).
fn shown(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_with_and_without_ports() {
        assert_eq!(
            authority_of("gateway.discord.gg", 443),
            Some(("gateway.discord.gg", 443))
        );
        assert_eq!(
            authority_of("127.0.0.1:9001", 80),
            Some(("127.0.0.1", 9001))
        );
        assert_eq!(authority_of("[::1]:9001", 80), Some(("::1", 9001)));
        assert_eq!(authority_of("[::1]", 80), Some(("::1", 80)));
        for bad in ["", ":80", "host:x", "[::1", "[::1]x", "host:0"] {
            assert_eq!(authority_of(bad, 80), None, "{bad}");
        }
    }
}
