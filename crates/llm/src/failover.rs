//! Failover chains: `[model] default = ["main", "backup", "local"]` tries providers in order.
//! A retryable failure (429, 5xx, timeout, connection error, malformed or cut stream — after
//! the provider's own retries) moves on to the next provider and cools the failed one down
//! for a while; a non-retryable one (400, 401/403, 404, context length) is returned at once,
//! because another provider would not fix it or would hide a configuration error.

use async_trait::async_trait;
use reef_core::{ModelClient, ModelError, ModelRequest, ModelResponse, OnStream, StreamEvent};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A chain of model clients that behaves as one.
pub struct FailoverClient {
    name: String,
    members: Vec<Arc<dyn ModelClient>>,
    cooldown: Duration,
    /// Per member: until when it is skipped after a retryable failure.
    cooling: Mutex<Vec<Option<Instant>>>,
}

impl FailoverClient {
    /// A chain over `members` (tried in order). `cooldown` is how long a member that failed
    /// with a retryable error is skipped. Its `provider()` names the whole chain
    /// (`main>backup>local`); each response names the member that served it.
    pub fn new(members: Vec<Arc<dyn ModelClient>>, cooldown: Duration) -> FailoverClient {
        let name = members
            .iter()
            .map(|m| m.provider())
            .collect::<Vec<_>>()
            .join(">");
        let cooling = Mutex::new(vec![None; members.len()]);
        FailoverClient {
            name,
            members,
            cooldown,
            cooling,
        }
    }

    /// The order to try members in now: those not cooling down first (in chain order), then
    /// the cooling ones by how soon they recover, so a request is never refused outright.
    fn order(&self, now: Instant) -> Vec<usize> {
        let cooling = self.cooling.lock().unwrap_or_else(PoisonError::into_inner);
        let mut ready: Vec<usize> = Vec::new();
        let mut waiting: Vec<(Instant, usize)> = Vec::new();
        for (i, until) in cooling.iter().enumerate() {
            match until {
                Some(until) if *until > now => waiting.push((*until, i)),
                _ => ready.push(i),
            }
        }
        waiting.sort();
        ready.extend(waiting.into_iter().map(|(_, i)| i));
        ready
    }

    fn set_cooling(&self, index: usize, until: Option<Instant>) {
        let mut cooling = self.cooling.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = cooling.get_mut(index) {
            *slot = until;
        }
    }
}

#[async_trait]
impl ModelClient for FailoverClient {
    fn provider(&self) -> &str {
        &self.name
    }

    fn model(&self) -> &str {
        self.members.first().map_or("", |m| m.model())
    }

    fn wire_api(&self) -> Option<reef_core::WireApi> {
        self.members.first().and_then(|m| m.wire_api())
    }

    /// The smallest window of the members that know theirs: whichever member serves, the
    /// history fits.
    fn context_tokens(&self) -> Option<u32> {
        self.members.iter().filter_map(|m| m.context_tokens()).min()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        on_event: &OnStream<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let order = self.order(Instant::now());
        let mut last_error = None;
        for (attempt, index) in order.into_iter().enumerate() {
            let Some(member) = self.members.get(index) else {
                continue;
            };
            if let Some(previous) = &last_error {
                // Text a failed member streamed belongs to a failed attempt: discard it.
                on_event(StreamEvent::Retrying {
                    attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
                    error: previous,
                });
            }
            match member.complete(request, on_event).await {
                Ok(mut response) => {
                    self.set_cooling(index, None);
                    response
                        .served_by
                        .get_or_insert_with(|| member.provider().to_owned());
                    return Ok(response);
                }
                Err(err) if err.is_retryable() => {
                    tracing::warn!(
                        provider = %member.provider(),
                        error = %err,
                        cooldown_secs = self.cooldown.as_secs(),
                        "provider failed; trying the next one in the chain"
                    );
                    self.set_cooling(index, Some(Instant::now() + self.cooldown));
                    last_error = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            ModelError::new(
                self.name.clone(),
                reef_core::ModelErrorKind::BadRequest,
                "the failover chain has no providers",
            )
        }))
    }
}
