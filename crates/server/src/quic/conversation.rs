//! One conversation on the QUIC gateway: a `hello` with a token and an agent, then messages
//! put in the agent's inbox, and the agent's protocol events for the turns that answer them
//! sent back as they happen. A refused frame (over 1 MiB, not JSON of the protocol, a wrong
//! token, an agent the token may not reach) is answered with an error frame and ends this
//! stream only.

use super::{Shared, Used};
use crate::auth::{self, Grant};
use crate::error::ApiError;
use axum::http::StatusCode;
use reef_core::{EventMsg, SubmissionId};
use reef_quic::frame::{self, FrameError};
use reef_quic::protocol::close;
use reef_quic::{ClientFrame, ErrorCode, ServerFrame};
use reef_runtime::{LiveEvent, Sender};
use reef_security::api_token::{Scope, token_hash};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};
use tokio::sync::{broadcast, mpsc};

/// The key the root token is remembered under among a connection's tokens.
pub(super) const ROOT: &str = "root";

/// A refusal: the error frame's code and text.
struct Refusal(ErrorCode, String);

impl From<FrameError> for Refusal {
    fn from(err: FrameError) -> Refusal {
        let code = match err {
            FrameError::TooLarge { .. } => ErrorCode::TooLarge,
            _ => ErrorCode::BadFrame,
        };
        Refusal(code, err.to_string())
    }
}

impl From<ApiError> for Refusal {
    fn from(err: ApiError) -> Refusal {
        let code = match err.status {
            StatusCode::UNAUTHORIZED if err.message.contains("revoked") => ErrorCode::Revoked,
            StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
            StatusCode::FORBIDDEN => ErrorCode::Forbidden,
            StatusCode::NOT_FOUND => ErrorCode::NotFound,
            StatusCode::TOO_MANY_REQUESTS => ErrorCode::RateLimited,
            StatusCode::BAD_REQUEST | StatusCode::CONFLICT => ErrorCode::Refused,
            _ => ErrorCode::Unavailable,
        };
        Refusal(code, err.message)
    }
}

/// The open conversation.
struct Open {
    shared: Arc<Shared>,
    grant: Grant,
    rate: Option<u32>,
    agent: reef_store::AgentRecord,
    /// Inbox ids of this stream's messages whose turns have not ended.
    waiting: HashSet<u64>,
}

/// Serves one stream until the client ends it and every answer it waits for is sent, or a
/// frame is refused.
pub(super) async fn serve(
    shared: Arc<Shared>,
    used: Used,
    remote: SocketAddr,
    mut send: quinn::SendStream,
    recv: quinn::RecvStream,
) {
    let (frames, mut incoming) = mpsc::channel(16);
    // Frames are read on their own task: a read is not safe to cancel halfway.
    let reader = tokio::spawn(read_frames(recv, frames));
    // Subscribed before anything is sent, so no event of an answer is missed.
    let mut live = shared.runtime.live_events();
    let result = match open(&shared, &used, incoming.recv().await).await {
        Ok(mut open) => {
            let ready = ServerFrame::Ready {
                agent: open.agent.name.clone(),
                state: open.agent.state.to_string(),
                token: open.grant.name.clone(),
            };
            match frame::write_frame(&mut send, &ready).await {
                Ok(()) => open.converse(&mut send, &mut incoming, &mut live).await,
                Err(_) => Ok(()),
            }
        }
        Err(refusal) => Err(refusal),
    };
    reader.abort();
    match result {
        Ok(()) => {
            // Already finished or reset by the client: nothing more to end.
            let _ended = send.finish();
        }
        Err(Refusal(code, message)) => {
            tracing::debug!(%remote, ?code, %message, "a QUIC stream was refused");
            let refused = ServerFrame::Error { code, message };
            // The error frame, then the end of the stream (the reader has told the client to
            // stop sending when its frame was refused). A client already gone hears nothing.
            if frame::write_frame(&mut send, &refused).await.is_ok() {
                let _ended = send.finish();
            }
        }
    }
}

/// Reads frames into `frames` until the stream ends or a frame is refused.
async fn read_frames(
    mut recv: quinn::RecvStream,
    frames: mpsc::Sender<Result<ClientFrame, FrameError>>,
) {
    loop {
        let read = frame::read_frame::<_, ClientFrame>(&mut recv).await;
        let (item, last) = match read {
            Ok(Some(frame)) => (Ok(frame), false),
            Ok(None) => return,
            Err(err) => (Err(err), true),
        };
        if frames.send(item).await.is_err() || last {
            if last {
                let _stopped = recv.stop(close::REFUSED.into());
            }
            return;
        }
    }
}

/// Checks the stream's `hello`: its token, its scope and the agent.
async fn open(
    shared: &Arc<Shared>,
    used: &Used,
    first: Option<Result<ClientFrame, FrameError>>,
) -> Result<Open, Refusal> {
    let (token, agent) = match first {
        Some(Ok(ClientFrame::Hello { token, agent })) => (token, agent),
        Some(Ok(ClientFrame::Message { .. })) => {
            return Err(Refusal(
                ErrorCode::BadFrame,
                "the first frame of a stream must be `hello` with a token and an agent".into(),
            ));
        }
        Some(Err(err)) => return Err(err.into()),
        None => {
            return Err(Refusal(
                ErrorCode::BadFrame,
                "the stream ended before `hello`".into(),
            ));
        }
    };
    let (grant, rate) = auth::check(&shared.keys, shared.runtime.store(), token.trim()).await?;
    if let Some(rate) = rate {
        auth::admit(&shared.keys, &grant, rate)?;
    }
    let allowed = match &grant.scope {
        Scope::Operator => true,
        Scope::Agent(own) => *own == agent,
        Scope::ReadOnly => false,
    };
    if !allowed {
        return Err(Refusal(
            ErrorCode::Forbidden,
            format!(
                "token `{}` (scope {}) cannot talk to agent {agent}",
                grant.name, grant.scope
            ),
        ));
    }
    let record = shared
        .runtime
        .get_agent(&agent)
        .await
        .map_err(ApiError::from)?;
    let key = match grant.id.as_str() {
        ROOT => ROOT.to_owned(),
        _ => token_hash(token.trim()),
    };
    used.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, grant.name.clone());
    Ok(Open {
        shared: shared.clone(),
        grant,
        rate,
        agent: record,
        waiting: HashSet::new(),
    })
}

impl Open {
    /// Takes messages and sends back the events of their turns, until the client has ended
    /// the stream and nothing is awaited.
    async fn converse(
        &mut self,
        send: &mut quinn::SendStream,
        incoming: &mut mpsc::Receiver<Result<ClientFrame, FrameError>>,
        live: &mut broadcast::Receiver<LiveEvent>,
    ) -> Result<(), Refusal> {
        let mut reading = true;
        while reading || !self.waiting.is_empty() {
            tokio::select! {
                frame = incoming.recv(), if reading => match frame {
                    Some(Ok(ClientFrame::Message { text, key })) => {
                        let accepted = self.deliver(&text, key).await?;
                        write(send, &accepted).await?;
                    }
                    Some(Ok(ClientFrame::Hello { .. })) => {
                        return Err(Refusal(
                            ErrorCode::BadFrame,
                            "`hello` comes once, first; open another stream for another \
                             conversation".into(),
                        ));
                    }
                    Some(Err(err)) => return Err(err.into()),
                    None => reading = false,
                },
                event = live.recv() => match event {
                    Ok(event) => self.forward(send, event).await?,
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        return Err(Refusal(
                            ErrorCode::Lagged,
                            format!("this stream fell behind the agent and missed {missed} \
                                     events; the transcript has them"),
                        ));
                    }
                    Err(broadcast::error::RecvError::Closed) => {
                        return Err(Refusal(ErrorCode::Unavailable, "reef is shutting down".into()));
                    }
                },
            }
        }
        Ok(())
    }

    /// Puts `text` in the agent's inbox.
    async fn deliver(&mut self, text: &str, key: Option<String>) -> Result<ServerFrame, Refusal> {
        if let Some(rate) = self.rate {
            auth::admit(&self.shared.keys, &self.grant, rate)?;
        }
        let key = key.unwrap_or_else(|| format!("quic:{}", SubmissionId::new()));
        let sent = self
            .shared
            .runtime
            .send_message(&self.agent.name, Sender::Operator, text, &key, None)
            .await
            .map_err(ApiError::from)?;
        if !sent.duplicate
            && let Some(id) = sent.inbox_id
        {
            self.waiting.insert(id);
            self.shared.runtime.channel_traffic(super::BOARD_NAME, 1, 0);
        }
        self.audit(&key, sent.inbox_id).await;
        Ok(ServerFrame::Accepted {
            key,
            inbox_id: sent.inbox_id,
            duplicate: sent.duplicate,
        })
    }

    /// Sends `event` when it belongs to a turn answering this stream.
    async fn forward(
        &mut self,
        send: &mut quinn::SendStream,
        event: LiveEvent,
    ) -> Result<(), Refusal> {
        if event.agent != self.agent.id
            || !event.inbox_ids.iter().any(|id| self.waiting.contains(id))
        {
            return Ok(());
        }
        if matches!(event.event.msg, EventMsg::TurnEnded { .. }) {
            for id in &event.inbox_ids {
                self.waiting.remove(id);
            }
            self.shared.runtime.channel_traffic(super::BOARD_NAME, 0, 1);
        }
        write(send, &ServerFrame::Event { event: event.event }).await
    }

    async fn audit(&self, key: &str, inbox_id: Option<u64>) {
        let data = serde_json::json!({
            "front": "quic",
            "token": {"name": self.grant.name, "id": self.grant.id, "scope": self.grant.scope.to_string()},
            "method": "message",
            "agent": self.agent.name,
            "key": key,
            "inbox_id": inbox_id,
        });
        if let Err(err) = self
            .shared
            .runtime
            .store()
            .append_audit("api.request", Some(&self.agent.name), data)
            .await
        {
            tracing::warn!(error = %err, "cannot record a QUIC message in the audit log");
        }
    }
}

/// Writes a frame; a stream the client has reset ends the conversation quietly.
async fn write(send: &mut quinn::SendStream, frame: &ServerFrame) -> Result<(), Refusal> {
    frame::write_frame(send, frame)
        .await
        .map_err(|err| Refusal(ErrorCode::Unavailable, err.to_string()))
}
