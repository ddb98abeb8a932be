//! The capability check every tool call passes before it runs: the tool and what the tool
//! says the call needs, against the agent's token. A daemon agent's token is read from the
//! store at each check, so a revocation or a grant applies from the next call; a refusal is
//! written to the audit log as `cap.denied`.

use reef_core::Need;
use reef_security::cap::{CapError, Token};
use reef_store::Store;
use serde_json::json;
use std::sync::{Arc, Mutex, PoisonError};

/// Where a session's token comes from.
#[derive(Debug)]
pub enum TokenSource {
    /// A daemon agent's, kept in the store under its name.
    Stored,
    /// Minted for this session alone (`reef run`, `reef chat`).
    Fixed(Arc<Token>),
}

/// The session's rights: its token and the last one read and verified.
#[derive(Debug)]
pub struct Rights {
    source: TokenSource,
    verified: Mutex<Option<Arc<Token>>>,
}

/// A call that may not run, and why (sent back to the model).
#[derive(Debug)]
pub(crate) struct Refused(pub String);

/// Why a decision refused: the reason in words, and its parts for the audit record.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub reason: String,
    pub detail: serde_json::Value,
}

impl Rights {
    pub fn new(source: TokenSource) -> Rights {
        Rights {
            source,
            verified: Mutex::new(None),
        }
    }

    /// Ok when `agent`'s token grants every need; otherwise the refusal, recorded in the audit
    /// log with the call it refused.
    pub(crate) async fn check(
        &self,
        store: &Store,
        agent: &str,
        call: (&str, &str),
        needs: &[Need],
    ) -> Result<(), Refused> {
        let decision = self.decide(store, agent, needs).await;
        let Err(Refusal {
            reason: why,
            detail,
        }) = decision
        else {
            return Ok(());
        };
        let (call_id, tool) = call;
        let mut data = json!({"call_id": call_id, "tool": tool, "reason": why});
        if let (Some(obj), Some(detail)) = (data.as_object_mut(), detail.as_object()) {
            obj.extend(detail.clone());
        }
        if let Err(err) = store.append_audit("cap.denied", Some(agent), data).await {
            tracing::warn!(%agent, error = %err, "a refused call could not be recorded in the audit log");
        }
        Err(Refused(why))
    }

    /// Ok when `agent`'s token (as it is now) grants every need; nothing is recorded.
    pub async fn decide(&self, store: &Store, agent: &str, needs: &[Need]) -> Result<(), Refusal> {
        let plain = |reason: String| Refusal {
            reason,
            detail: json!({}),
        };
        let (token, revoked) = match &self.source {
            TokenSource::Fixed(token) => {
                let revoked = store
                    .revoked_ids()
                    .await
                    .map_err(|e| plain(format!("the capability check could not run: {e}")))?;
                (token.clone(), revoked)
            }
            TokenSource::Stored => {
                let state = store
                    .capability_state(agent)
                    .await
                    .map_err(|e| plain(format!("the capability check could not run: {e}")))?
                    .ok_or_else(|| plain(format!("no agent named `{agent}` holds a token")))?;
                let text = state
                    .token
                    .ok_or_else(|| plain(format!("`{agent}` has no capability token yet")))?;
                let token = self
                    .verified(&text, store)
                    .map_err(|e| plain(e.to_string()))?;
                (token, state.revoked)
            }
        };
        token
            .check(needs, |id| revoked.contains(id))
            .map_err(|denial| Refusal {
                reason: denial.to_string(),
                detail: denial.to_json(),
            })
    }

    /// The token `text`, verified once and kept until the stored text changes.
    fn verified(&self, text: &str, store: &Store) -> Result<Arc<Token>, CapError> {
        let mut held = self.verified.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(token) = held.as_ref().filter(|t| t.text() == text) {
            return Ok(token.clone());
        }
        let token = Arc::new(Token::parse(text, store.capability_root())?);
        *held = Some(token.clone());
        Ok(token)
    }
}
