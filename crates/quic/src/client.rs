//! The remote client: one QUIC connection to a gateway pinned to its certificate's
//! fingerprint, and conversations on it, each a stream opened with a token and an agent.

use crate::endpoint::{self, EndpointError, Refused};
use crate::frame::{self, FrameError};
use crate::protocol::{ClientFrame, ErrorCode, ServerFrame, close};
use reef_core::Event;
use std::net::SocketAddr;

/// Why the client failed; each says what to check.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The address does not resolve.
    #[error("cannot resolve `{addr}`: {message}")]
    Resolve { addr: String, message: String },
    /// The server's certificate is not the pinned one.
    #[error(
        "the gateway at {addr} presented a certificate with fingerprint {seen}, not the \
         pinned {pinned}: check the fingerprint `reef serve` printed (or someone is in \
         the middle)"
    )]
    WrongFingerprint {
        addr: String,
        seen: String,
        pinned: String,
    },
    /// The connection could not be made or was lost.
    #[error("connection to {addr}: {message}")]
    Connection { addr: String, message: String },
    /// The gateway refused the conversation or a message.
    #[error("the gateway refused: {message} ({code:?})")]
    Refused { code: ErrorCode, message: String },
    /// A frame could not be read or written.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The gateway sent something out of turn.
    #[error("the gateway sent an unexpected frame: {0}")]
    Unexpected(String),
    /// The stream ended before the answer.
    #[error("the gateway ended the conversation")]
    Ended,
}

/// A connection to a gateway.
pub struct Client {
    addr: String,
    endpoint: quinn::Endpoint,
    connection: quinn::Connection,
}

/// How a message fared: what the gateway said of it and, unless it was a duplicate, the
/// events of the turn that answered it.
#[derive(Debug)]
pub struct Said {
    pub inbox_id: Option<u64>,
    pub duplicate: bool,
    pub events: Vec<Event>,
}

impl Client {
    /// Connects to `addr` (`host:port`), trusting only the certificate whose SHA-256 is the
    /// fingerprint `pin` (`AB:CD:…`).
    pub async fn connect(addr: &str, pin: &str) -> Result<Client, ClientError> {
        let pin_bytes = endpoint::parse_fingerprint(pin)?;
        let resolve = |message: String| ClientError::Resolve {
            addr: addr.to_owned(),
            message,
        };
        let target: SocketAddr = tokio::net::lookup_host(addr)
            .await
            .map_err(|e| resolve(e.to_string()))?
            .next()
            .ok_or_else(|| resolve("no address".into()))?;
        let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
        let name = match host.parse::<std::net::IpAddr>() {
            Ok(_) => "reef",
            Err(_) => host.trim_start_matches('[').trim_end_matches(']'),
        };
        let refused = Refused::default();
        let endpoint = endpoint::client(pin_bytes, refused.clone())?;
        let lost = |message: String| ClientError::Connection {
            addr: addr.to_owned(),
            message,
        };
        let connecting = endpoint
            .connect(target, name)
            .map_err(|e| lost(e.to_string()))?;
        let connection = match connecting.await {
            Ok(connection) => connection,
            Err(e) => {
                let seen = refused
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                return Err(match seen {
                    Some(seen) => ClientError::WrongFingerprint {
                        addr: addr.to_owned(),
                        seen,
                        pinned: endpoint::fingerprint_hex(&pin_bytes),
                    },
                    None => lost(e.to_string()),
                });
            }
        };
        Ok(Client {
            addr: addr.to_owned(),
            endpoint,
            connection,
        })
    }

    /// Opens a conversation with `agent`, authenticated by `token`.
    pub async fn open(&self, token: &str, agent: &str) -> Result<Conversation, ClientError> {
        let (send, recv) = self.connection.open_bi().await.map_err(|e| self.lost(&e))?;
        let mut conversation = Conversation {
            send,
            recv,
            agent: String::new(),
            state: String::new(),
        };
        conversation
            .write(&ClientFrame::Hello {
                token: token.to_owned(),
                agent: agent.to_owned(),
            })
            .await?;
        match conversation.next().await? {
            Some(ServerFrame::Ready { agent, state, .. }) => {
                conversation.agent = agent;
                conversation.state = state;
                Ok(conversation)
            }
            Some(other) => Err(ClientError::Unexpected(format!("{other:?}"))),
            None => Err(ClientError::Ended),
        }
    }

    /// A stream with nothing sent yet, for speaking the framing by hand.
    pub async fn open_raw(&self) -> Result<(quinn::SendStream, quinn::RecvStream), ClientError> {
        self.connection.open_bi().await.map_err(|e| self.lost(&e))
    }

    /// The QUIC connection (its close reason, say).
    pub fn connection(&self) -> &quinn::Connection {
        &self.connection
    }

    /// Closes the connection and waits until the gateway knows.
    pub async fn close(self) {
        self.connection.close(close::DONE.into(), b"done");
        self.endpoint.wait_idle().await;
    }

    fn lost(&self, e: &quinn::ConnectionError) -> ClientError {
        ClientError::Connection {
            addr: self.addr.clone(),
            message: e.to_string(),
        }
    }
}

/// One conversation: a stream to one agent.
pub struct Conversation {
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    agent: String,
    state: String,
}

impl Conversation {
    /// The agent's name, as the gateway confirmed it.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The agent's state when the conversation opened.
    pub fn state(&self) -> &str {
        &self.state
    }

    /// Sends `text`; the answer comes as frames from [`Conversation::next`].
    pub async fn send(&mut self, text: &str, key: Option<String>) -> Result<(), ClientError> {
        self.write(&ClientFrame::Message {
            text: text.to_owned(),
            key,
        })
        .await
    }

    /// Sends `text` and reads until the turn answering it ends, handing each event to
    /// `seen` as it comes.
    pub async fn say(
        &mut self,
        text: &str,
        key: Option<String>,
        mut seen: impl FnMut(&Event),
    ) -> Result<Said, ClientError> {
        self.send(text, key).await?;
        let (inbox_id, duplicate) = loop {
            match self.next().await? {
                Some(ServerFrame::Accepted {
                    inbox_id,
                    duplicate,
                    ..
                }) => break (inbox_id, duplicate),
                // Events of a turn still running from an earlier message.
                Some(ServerFrame::Event { event }) => seen(&event),
                Some(other) => return Err(ClientError::Unexpected(format!("{other:?}"))),
                None => return Err(ClientError::Ended),
            }
        };
        let mut events = Vec::new();
        if duplicate {
            return Ok(Said {
                inbox_id,
                duplicate,
                events,
            });
        }
        loop {
            let frame = self.next().await?;
            let ends = frame.as_ref().is_some_and(ServerFrame::ends_turn);
            match frame {
                Some(ServerFrame::Event { event }) => {
                    seen(&event);
                    events.push(event);
                }
                Some(other) => return Err(ClientError::Unexpected(format!("{other:?}"))),
                None => return Err(ClientError::Ended),
            }
            if ends {
                return Ok(Said {
                    inbox_id,
                    duplicate,
                    events,
                });
            }
        }
    }

    /// The next frame from the gateway; an error frame becomes [`ClientError::Refused`];
    /// `None` when the gateway ended the stream.
    pub async fn next(&mut self) -> Result<Option<ServerFrame>, ClientError> {
        match frame::read_frame::<_, ServerFrame>(&mut self.recv).await? {
            Some(ServerFrame::Error { code, message }) => {
                Err(ClientError::Refused { code, message })
            }
            other => Ok(other),
        }
    }

    /// Ends the conversation.
    pub fn finish(mut self) {
        // Already finished or reset: nothing more to end.
        let _ended = self.send.finish();
    }

    async fn write(&mut self, frame: &ClientFrame) -> Result<(), ClientError> {
        frame::write_frame(&mut self.send, frame).await?;
        Ok(())
    }
}
