//! Slack's Web API: one `POST` per method with the token as `Authorization: Bearer`, a JSON
//! body, and an answer `{"ok": true, …}` or `{"ok": false, "error": CODE}`. A 429 waits the
//! `Retry-After` it names and tries again. No error ever shows a token.

use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

/// Times one request waits out a 429 before it fails.
const MAX_RATE_WAITS: u32 = 5;
/// The longest `Retry-After` honoured; a longer one fails the request.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);
/// How long one request may take.
const REQUEST_WAIT: Duration = Duration::from_secs(30);

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Slack could not be reached, or answered 5xx or garbage: retry later.
    #[error("{0}")]
    Transport(String),
    /// The token was refused (`invalid_auth`, `not_authed`, `token_revoked`, …): the
    /// configuration must change.
    #[error("Slack refused the token ({0})")]
    Unauthorized(String),
    /// The request was wrong or not allowed (`channel_not_found`, `not_in_channel`, …).
    #[error("{method}: {error}")]
    Refused { method: String, error: String },
    /// 429 too often, or with a wait longer than reef keeps a request.
    #[error("{method}: rate limited (retry after {retry_after} s)")]
    RateLimited { method: String, retry_after: u64 },
}

/// A Web API client; each call names its token (the bot's, or the app-level one).
#[derive(Clone)]
pub struct WebApi {
    http: reqwest::Client,
    base: String,
}

impl WebApi {
    /// A client at `api_url` (`https://slack.com/api`, no trailing slash).
    pub fn new(http: reqwest::Client, api_url: &str) -> WebApi {
        WebApi {
            http,
            base: api_url.to_owned(),
        }
    }

    /// Calls `method` with `body` as `token`, waiting out 429s.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        token: &str,
        body: &Value,
    ) -> Result<T, ApiError> {
        let mut waits = 0;
        loop {
            let response = self
                .http
                .post(format!("{}/{method}", self.base))
                .timeout(REQUEST_WAIT)
                .bearer_auth(token)
                .json(body)
                .send()
                .await
                .map_err(|e| ApiError::Transport(format!("{method}: {}", e.without_url())))?;
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            let text = response
                .text()
                .await
                .map_err(|e| ApiError::Transport(format!("{method}: {}", e.without_url())))?;
            let answer: Option<Value> = serde_json::from_str(&text).ok();
            let error = answer
                .as_ref()
                .and_then(|a| a["error"].as_str())
                .unwrap_or_default()
                .to_owned();
            if status == 429 || error == "ratelimited" {
                let retry_after = retry_after.unwrap_or(1);
                waits += 1;
                if waits > MAX_RATE_WAITS || Duration::from_secs(retry_after) > MAX_RETRY_AFTER {
                    return Err(ApiError::RateLimited {
                        method: method.to_owned(),
                        retry_after,
                    });
                }
                tracing::info!(%method, retry_after, "Slack rate limit: waiting");
                tokio::time::sleep(Duration::from_secs(retry_after)).await;
                continue;
            }
            if status >= 500 {
                return Err(ApiError::Transport(format!("{method}: HTTP {status}")));
            }
            let Some(answer) = answer else {
                return Err(ApiError::Transport(format!(
                    "{method}: HTTP {status} with a body that is not JSON"
                )));
            };
            if answer["ok"] == Value::Bool(true) {
                return serde_json::from_value(answer).map_err(|e| {
                    ApiError::Transport(format!("{method}: an answer reef cannot read ({e})"))
                });
            }
            return Err(match error.as_str() {
                "invalid_auth"
                | "not_authed"
                | "account_inactive"
                | "token_revoked"
                | "token_expired"
                | "not_allowed_token_type" => ApiError::Unauthorized(error),
                "" => ApiError::Transport(format!("{method}: HTTP {status}, not ok, no error")),
                _ => ApiError::Refused {
                    method: method.to_owned(),
                    error,
                },
            });
        }
    }
}
