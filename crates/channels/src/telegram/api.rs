//! The Bot API over HTTPS: one JSON `POST` per method, answers `{"ok", "result"}` or
//! `{"ok": false, "error_code", "description", "parameters": {"retry_after"}}`. A 429 waits
//! the `retry_after` it names and tries again; the rest become [`ApiError`]s that say whether
//! the bot should retry, give up on the request, or stop (a token the platform refuses).
//! The token is part of every URL, so no URL or request error is ever shown with it.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::time::Duration;

/// Times one request waits out a 429 before it fails.
const MAX_RATE_WAITS: u32 = 5;
/// The longest `retry_after` honoured; a longer one fails the request.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);
/// The largest file reef downloads (the Bot API's own limit for bots).
pub const MAX_FILE_BYTES: u64 = 20 * 1024 * 1024;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The platform could not be reached, or answered 5xx or garbage: retry later.
    #[error("{0}")]
    Transport(String),
    /// The token was refused (401) or the bot is gone (404): the configuration must change.
    #[error("the Bot API refused the token ({0})")]
    Unauthorized(String),
    /// The request was wrong (400, 403: blocked by the user, chat not found): not retried.
    #[error("{method}: {description}")]
    Refused { method: String, description: String },
    /// 429 too often, or with a wait longer than reef keeps a request.
    #[error("{method}: rate limited (retry after {retry_after} s)")]
    RateLimited { method: String, retry_after: u64 },
    /// Another getUpdates or a webhook is active (409).
    #[error("{0}")]
    Conflict(String),
}

/// A Bot API client for one bot.
#[derive(Clone)]
pub struct BotApi {
    http: reqwest::Client,
    /// `{api_url}/bot{token}`.
    base: String,
    /// `{api_url}/file/bot{token}`.
    files: String,
}

#[derive(Deserialize)]
struct Reply {
    ok: bool,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    error_code: Option<u16>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<ReplyParameters>,
}

#[derive(Deserialize)]
struct ReplyParameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

impl BotApi {
    /// A client of the bot whose token is `token`, at `api_url` (no trailing slash). `http`
    /// should have no overall timeout shorter than a long poll.
    pub fn new(http: reqwest::Client, api_url: &str, token: &str) -> BotApi {
        BotApi {
            http,
            base: format!("{api_url}/bot{token}"),
            files: format!("{api_url}/file/bot{token}"),
        }
    }

    /// Calls `method` with `body`, waiting out 429s; `wait` bounds the whole HTTP exchange.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &Value,
        wait: Duration,
    ) -> Result<T, ApiError> {
        let mut waits = 0;
        loop {
            let reply = self.once(method, body, wait).await?;
            if reply.ok {
                return serde_json::from_value(reply.result).map_err(|e| {
                    ApiError::Transport(format!("{method}: an answer reef cannot read ({e})"))
                });
            }
            let description = reply.description.unwrap_or_default();
            match reply.error_code.unwrap_or(0) {
                429 => {
                    let retry_after = reply.parameters.and_then(|p| p.retry_after).unwrap_or(1);
                    waits += 1;
                    if waits > MAX_RATE_WAITS || Duration::from_secs(retry_after) > MAX_RETRY_AFTER
                    {
                        return Err(ApiError::RateLimited {
                            method: method.to_owned(),
                            retry_after,
                        });
                    }
                    tracing::info!(%method, retry_after, "Bot API rate limit: waiting");
                    tokio::time::sleep(Duration::from_secs(retry_after)).await;
                }
                401 | 404 => return Err(ApiError::Unauthorized(description)),
                409 => return Err(ApiError::Conflict(format!("{method}: {description}"))),
                code if code >= 500 || code == 0 => {
                    return Err(ApiError::Transport(format!(
                        "{method}: {code} {description}"
                    )));
                }
                _ => {
                    return Err(ApiError::Refused {
                        method: method.to_owned(),
                        description,
                    });
                }
            }
        }
    }

    async fn once(&self, method: &str, body: &Value, wait: Duration) -> Result<Reply, ApiError> {
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .timeout(wait)
            .json(body)
            .send()
            .await
            .map_err(|e| ApiError::Transport(format!("{method}: {}", describe(e))))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| ApiError::Transport(format!("{method}: {}", describe(e))))?;
        serde_json::from_str::<Reply>(&text).map_err(|_| {
            ApiError::Transport(format!(
                "{method}: HTTP {status} with a body that is not the Bot API's"
            ))
        })
    }

    /// Downloads the file at `path` (from `getFile`), at most [`MAX_FILE_BYTES`].
    pub async fn download(&self, path: &str) -> Result<Vec<u8>, ApiError> {
        if path.contains("..") || path.starts_with('/') {
            return Err(ApiError::Transport(format!(
                "getFile gave a bad path {path:?}"
            )));
        }
        let mut response = self
            .http
            .get(format!("{}/{path}", self.files))
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .map_err(|e| ApiError::Transport(format!("file download: {}", describe(e))))?;
        if !response.status().is_success() {
            return Err(ApiError::Transport(format!(
                "file download: HTTP {}",
                response.status()
            )));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ApiError::Transport(format!("file download: {}", describe(e))))?
        {
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > MAX_FILE_BYTES {
                return Err(ApiError::Transport(format!(
                    "file download: larger than {MAX_FILE_BYTES} bytes"
                )));
            }
        }
        Ok(bytes)
    }

    /// `getMe`.
    pub async fn get_me(&self) -> Result<super::types::User, ApiError> {
        self.call("getMe", &json!({}), Duration::from_secs(30))
            .await
    }
}

/// A request error without its URL (which holds the token).
fn describe(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}
