//! `POST /hooks/NAME`: inbound webhooks. A delivery must be signed with the hook's secret
//! (GitHub's `X-Hub-Signature-256`, or `X-Reef-Signature: t=UNIX,v1=HEX` within five
//! minutes), and each signature is accepted once. Its payload (JSON pretty-printed, or text)
//! becomes a message to an agent or the task of a one-off agent. Anything refused is a 401
//! and a `hook.refused` event; nothing reaches an agent. No bearer token: the signature is
//! the authentication.

use crate::AppState;
use crate::error::ApiError;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use reef_config::{HookRoute, read_secret};
use reef_core::ContentSource;
use reef_runtime::{MAX_MESSAGE_BYTES, Runtime, Sender, SpawnRequest};
use reef_security::webhook::{self, SignatureError};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// How long an accepted signature is remembered (a GitHub signature carries no time).
const REMEMBER: Duration = Duration::from_secs(30 * 24 * 3600);

pub async fn deliver(
    State(s): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let rt = &s.runtime;
    let hooks = &rt.config().hooks;
    let hook = hooks
        .hooks
        .get(&name)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no hook named `{name}`")))?;
    if body.len() as u64 > hooks.max_body {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is over hooks.max_body ({} bytes)", hooks.max_body),
        ));
    }
    let spec = rt
        .config()
        .secrets
        .iter()
        .find(|s| s.name == hook.secret)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the hook's secret is not configured",
            )
        })?;
    let secret = read_secret(spec, Some(&rt.config().vault)).map_err(|e| {
        tracing::error!(hook = %name, error = %e, "a webhook's secret cannot be read");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the hook's secret cannot be read",
        )
    })?;
    let header = |h: &str| headers.get(h).and_then(|v| v.to_str().ok());
    let verified = match (header("x-reef-signature"), header("x-hub-signature-256")) {
        (Some(reef), _) => webhook::verify_reef(
            secret.expose().as_bytes(),
            &body,
            reef,
            reef_store::unix_now(),
        ),
        (None, Some(github)) => webhook::verify_github(secret.expose().as_bytes(), &body, github),
        (None, None) => Err(SignatureError::Missing),
    };
    let verified = match verified {
        Ok(v) => v,
        Err(e) => return Err(refuse(&s, &name, &e.to_string()).await),
    };
    // A routine's fire is keyed by the signature in the transaction that claims it, so a
    // replay claims nothing and a sender's retry after a crash still fires; other routes
    // remember accepted signatures first.
    let routed_to_routine = matches!(hook.route, HookRoute::Routine(_));
    let fresh = routed_to_routine
        || rt
            .store()
            .accept_hook_delivery(&name, &verified.digest, REMEMBER)
            .await
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    if !fresh {
        return Err(refuse(&s, &name, "this signature was accepted before (a replay)").await);
    }
    // The event name is the sender's word, unsigned: only a plain one is shown to the agent.
    let event = header("x-github-event").filter(|e| {
        (1..=64).contains(&e.len()) && e.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
    });
    let (head, payload) = message(&name, event, &body);
    // The payload is the sender's: fenced, checked, labelled with the hook.
    let text = format!(
        "{head}{}",
        rt.fence_incoming(
            ContentSource::Webhook,
            &format!("hook:{name}"),
            &payload,
            None
        )
        .await
    );
    let key = format!("hook:{name}:{}", verified.digest);
    let delivered = deliver_to(rt, &name, &hook.route, &verified.digest, text, &key).await;
    let agent = match delivered {
        Ok(Some(agent)) => agent,
        Ok(None) => {
            return Err(refuse(&s, &name, "this signature was accepted before (a replay)").await);
        }
        Err(e) => {
            // Not delivered: the sender's retry of this signature must not count as a replay.
            if let Err(forget) = rt
                .store()
                .forget_hook_delivery(&name, &verified.digest)
                .await
            {
                tracing::warn!(hook = %name, error = %forget, "cannot forget an undelivered webhook");
            }
            return Err(e.into());
        }
    };
    if let Err(e) = rt
        .record_event("hook.accepted", None, json!({"hook": name, "agent": agent}))
        .await
    {
        tracing::warn!(hook = %name, error = %e, "cannot record a webhook event");
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"hook": name, "agent": agent})),
    ))
}

/// Hands a verified delivery to its route; the agent that got it, or `None` when a routine
/// had been fired by this signature before (a replay).
async fn deliver_to(
    rt: &Runtime,
    hook: &str,
    route: &HookRoute,
    digest: &str,
    text: String,
    key: &str,
) -> Result<Option<String>, reef_runtime::RuntimeError> {
    match route {
        HookRoute::Routine(routine) => {
            match rt.fire_hook_routine(routine, digest, &text).await? {
                reef_store::Claimed::Job { .. } => {}
                reef_store::Claimed::AlreadyClaimed => return Ok(None),
                reef_store::Claimed::Failed { reason, .. } => {
                    tracing::warn!(%hook, %routine, %reason, "a webhook routine's run failed");
                }
                reef_store::Claimed::Skipped => {
                    tracing::info!(%hook, %routine, "a webhook routine's fire was skipped");
                }
            }
            Ok(Some(format!("routine:{routine}")))
        }
        HookRoute::Agent(agent) => {
            let label = format!("hook:{hook}");
            rt.send_message(agent, Sender::Channel(&label), &text, key, None)
                .await?;
            Ok(Some(agent.clone()))
        }
        HookRoute::SpawnOnce(template) => {
            // An agent name: at most 40 characters, starting with a letter or digit.
            let stem: String = hook
                .trim_start_matches(['-', '_'])
                .chars()
                .take(27)
                .collect();
            let stem = if stem.is_empty() {
                "hook".to_owned()
            } else {
                stem
            };
            let agent = format!("{stem}-{}", &digest[..12]);
            rt.spawn_agent(
                SpawnRequest {
                    name: agent.clone(),
                    template: template.clone(),
                    task: Some(text),
                    ephemeral: true,
                    ..SpawnRequest::default()
                },
                None,
            )
            .await?;
            Ok(Some(agent))
        }
    }
}

/// Refusals recorded per hook: at most one `hook.refused` event a second for each, so
/// unsigned traffic cannot push real events out of the bounded history.
#[derive(Debug, Default)]
pub(crate) struct Refusals(std::sync::Mutex<std::collections::HashMap<String, (Instant, u64)>>);

impl Refusals {
    /// `Some(held)` when a refusal of `hook` may be recorded now.
    fn pass(&self, hook: &str, now: Instant) -> Option<u64> {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match map.get_mut(hook) {
            Some((at, held)) if now.saturating_duration_since(*at) < REFUSAL_EVERY => {
                *held += 1;
                None
            }
            Some((at, held)) => {
                *at = now;
                Some(std::mem::take(held))
            }
            None => {
                map.insert(hook.to_owned(), (now, 0));
                Some(0)
            }
        }
    }
}

/// How often one hook records a refusal.
const REFUSAL_EVERY: Duration = Duration::from_secs(1);

async fn refuse(s: &AppState, hook: &str, reason: &str) -> ApiError {
    tracing::warn!(%hook, %reason, "a webhook delivery is refused");
    if let Some(held) = s.hook_refusals.pass(hook, Instant::now())
        && let Err(e) = s
            .runtime
            .record_event(
                "hook.refused",
                None,
                json!({"hook": hook, "reason": reason, "held_before": held}),
            )
            .await
    {
        tracing::warn!(%hook, error = %e, "cannot record a webhook event");
    }
    ApiError::new(StatusCode::UNAUTHORIZED, reason)
}

/// The message an agent gets: which hook (and GitHub event), then the payload, JSON
/// pretty-printed, cut to what a message may hold with its fence.
fn message(hook: &str, event: Option<&str>, body: &[u8]) -> (String, String) {
    let payload = match serde_json::from_slice::<Value>(body) {
        Ok(json) => serde_json::to_string_pretty(&json).unwrap_or_else(|_| json.to_string()),
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    let head = match event {
        Some(event) => format!("Webhook `{hook}` delivery (event: {event}):\n"),
        None => format!("Webhook `{hook}` delivery:\n"),
    };
    // Room for the fence and what it may say it found.
    let room = MAX_MESSAGE_BYTES.saturating_sub(head.len() + 600);
    if payload.len() <= room {
        return (head, payload);
    }
    let mut end = room;
    while !payload.is_char_boundary(end) {
        end -= 1;
    }
    let cut = format!(
        "{}\n… (cut: the payload has {} bytes)",
        &payload[..end],
        payload.len()
    );
    (head, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_records_one_refusal_a_second_and_counts_the_rest() {
        let refusals = Refusals::default();
        let start = Instant::now();
        assert_eq!(refusals.pass("gh", start), Some(0));
        assert_eq!(refusals.pass("gh", start + Duration::from_millis(10)), None);
        assert_eq!(refusals.pass("gh", start + Duration::from_millis(20)), None);
        assert_eq!(refusals.pass("other", start), Some(0));
        assert_eq!(refusals.pass("gh", start + REFUSAL_EVERY), Some(2));
    }

    #[test]
    fn json_payloads_are_pretty_and_long_ones_cut() {
        let (head, text) = message("gh", Some("push"), br#"{"ref":"main"}"#);
        assert_eq!(head, "Webhook `gh` delivery (event: push):\n");
        assert_eq!(text, "{\n  \"ref\": \"main\"\n}");
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let (head, cut) = message("gh", None, long.as_bytes());
        assert!(
            head.len() + cut.len() + 500 <= MAX_MESSAGE_BYTES,
            "{}",
            cut.len()
        );
        assert!(cut.ends_with(&format!("(cut: the payload has {} bytes)", long.len())));
    }
}
