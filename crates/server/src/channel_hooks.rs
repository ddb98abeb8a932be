//! Webhook deliveries of bot channels, with no bearer token (the platform's secret is the
//! authentication). `POST /hooks/telegram/NAME`: each must carry the secret the channel gave
//! the platform (`X-Telegram-Bot-Api-Secret-Token`, compared in constant time).
//! `POST /hooks/slack/NAME`: each is signed with the app's signing secret (`v0` HMAC, the
//! timestamp within five minutes); the URL verification challenge is answered here. The
//! delivery goes to the channel, and the platform is answered 200 only once the gateway has
//! handled it, so what reef did not finish is delivered again.

use crate::AppState;
use crate::error::ApiError;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use reef_runtime::{ChannelHook, HookKind};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a delivery waits for the gateway; the platform gives up around a minute.
const HANDLED_WITHIN: Duration = Duration::from_secs(50);

pub async fn telegram(
    State(s): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let hook = hook_of(&s, &name, HookKind::Telegram)?;
    let given = headers
        .get("x-telegram-bot-api-secret-token")
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !crate::auth::constant_time_eq(given, hook.secret.as_bytes()) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "the delivery does not carry this channel's secret token",
        ));
    }
    let update: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid("body", format!("not JSON: {e}")))?;
    hand_over(&hook, update, HANDLED_WITHIN).await
}

/// How long a Slack delivery waits for the gateway: Slack wants an answer within 3 s.
const SLACK_HANDLED_WITHIN: Duration = Duration::from_millis(2500);

pub async fn slack(
    State(s): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let hook = hook_of(&s, &name, HookKind::Slack)?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let unsigned = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "the request carries no X-Slack-Signature and X-Slack-Request-Timestamp",
        )
    };
    let timestamp = header("x-slack-request-timestamp").ok_or_else(unsigned)?;
    let signature = header("x-slack-signature").ok_or_else(unsigned)?;
    reef_security::webhook::verify_slack(
        hook.secret.as_bytes(),
        &body,
        timestamp,
        signature,
        reef_store::unix_now(),
    )
    .map_err(|e| ApiError::new(StatusCode::UNAUTHORIZED, e.to_string()))?;
    let payload: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::invalid("body", format!("not JSON: {e}")))?;
    match payload["type"].as_str() {
        Some("url_verification") => {
            let challenge = payload["challenge"].as_str().ok_or_else(|| {
                ApiError::invalid("challenge", "missing from the url_verification request")
            })?;
            Ok(Json(json!({"challenge": challenge})))
        }
        Some("event_callback") => hand_over(&hook, payload, SLACK_HANDLED_WITHIN).await,
        // Other kinds (app rate limits, deactivations) are acknowledged and left alone.
        other => {
            tracing::info!(channel = %name, kind = ?other, "skipping a Slack request of this kind");
            Ok(Json(json!({"ok": true})))
        }
    }
}

/// The channel `name`'s hook, if it takes deliveries of `kind`.
fn hook_of(s: &AppState, name: &str, kind: HookKind) -> Result<ChannelHook, ApiError> {
    s.runtime
        .channel_hook(name)
        .filter(|hook| hook.kind == kind)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no webhook channel `{name}`"),
            )
        })
}

/// Hands `payload` to the channel and answers once it is handled within `within`.
async fn hand_over(
    hook: &ChannelHook,
    payload: Value,
    within: Duration,
) -> Result<Json<Value>, ApiError> {
    let update = payload;
    let (done, handled) = oneshot::channel();
    hook.feed.send((update, done)).await.map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the channel is not running",
        )
    })?;
    match tokio::time::timeout(within, handled).await {
        Ok(Ok(())) => Ok(Json(json!({"ok": true}))),
        // Not handled (the channel reconnected, or is slow): the platform tries again.
        _ => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the update was not handled; deliver it again",
        )),
    }
}
