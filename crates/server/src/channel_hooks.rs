//! `POST /hooks/telegram/NAME`: webhook deliveries of a Telegram channel in webhook mode.
//! Each must carry the secret the channel gave the platform (`X-Telegram-Bot-Api-Secret-
//! Token`, compared in constant time); the update goes to the channel, and the platform is
//! answered 200 only once the gateway has handled it, so an update reef did not finish is
//! delivered again. No bearer token: the secret is the authentication.

use crate::AppState;
use crate::error::ApiError;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
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
    let hook = s.runtime.channel_hook(&name).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no webhook channel `{name}`"),
        )
    })?;
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
    let (done, handled) = oneshot::channel();
    hook.feed.send((update, done)).await.map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the channel is not running",
        )
    })?;
    match tokio::time::timeout(HANDLED_WITHIN, handled).await {
        Ok(Ok(())) => Ok(Json(json!({"ok": true}))),
        // Not handled (the channel reconnected, or is slow): the platform tries again.
        _ => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the update was not handled; deliver it again",
        )),
    }
}
