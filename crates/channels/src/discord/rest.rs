//! Discord's REST API: `Authorization: Bot TOKEN` on every request, and its rate limits kept.
//! Each answer's `X-RateLimit-Bucket`, `-Remaining` and `-Reset-After` headers say which
//! bucket a route shares and when it refills; a request whose bucket is empty waits for the
//! refill before it goes. A 429 waits the `retry_after` it names (every route waits when it
//! is `global`) and tries again. The token never appears in an error.

use super::types::{Message, User};
use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Times one request waits out a 429 before it fails.
const MAX_RATE_WAITS: u32 = 5;
/// The longest wait honoured; a longer one fails the request.
const MAX_WAIT: Duration = Duration::from_secs(300);
/// Discord asks bots to name themselves as `DiscordBot (URL, VERSION)`.
const USER_AGENT: &str = concat!("DiscordBot (reef, ", env!("CARGO_PKG_VERSION"), ")");
/// How long one request may take.
const REQUEST_WAIT: Duration = Duration::from_secs(30);

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// Discord could not be reached, or answered 5xx or garbage: retry later.
    #[error("{0}")]
    Transport(String),
    /// 401: the token is wrong; the configuration must change.
    #[error("Discord refused the bot token ({0})")]
    Unauthorized(String),
    /// 400, 403, 404: the request was wrong or not allowed (no access to that channel).
    #[error("{what}: HTTP {status}: {message}")]
    Refused {
        what: String,
        status: u16,
        message: String,
    },
    /// 429 too often, or with a wait longer than reef keeps a request.
    #[error("{what}: rate limited (retry after {retry_after:.1} s)")]
    RateLimited { what: String, retry_after: f64 },
}

/// A client of the REST API for one bot; clones share the rate-limit state.
#[derive(Clone)]
pub struct Rest {
    http: reqwest::Client,
    base: String,
    authorization: String,
    limits: Arc<Mutex<Limits>>,
}

#[derive(Default)]
struct Limits {
    /// The bucket each route (`POST /channels/{id}/messages`) was last told it is in.
    hashes: HashMap<&'static str, String>,
    /// Per bucket and major parameter (the channel).
    buckets: HashMap<String, Bucket>,
    /// Every request waits until then (a global 429).
    global_until: Option<Instant>,
}

struct Bucket {
    remaining: u64,
    reset_at: Instant,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    message: String,
    #[serde(default)]
    retry_after: Option<f64>,
    #[serde(default)]
    global: bool,
}

impl Rest {
    /// A client at `api_url` (`https://discord.com/api/v10`, no trailing slash).
    pub fn new(http: reqwest::Client, api_url: &str, token: &str) -> Rest {
        Rest {
            http,
            base: api_url.to_owned(),
            authorization: format!("Bot {token}"),
            limits: Arc::default(),
        }
    }

    /// `GET /users/@me`: the bot itself (and the check that the token works).
    pub async fn me(&self) -> Result<User, RestError> {
        self.call(Method::GET, "GET /users/@me", "", "/users/@me", None)
            .await
    }

    /// `GET /gateway/bot`: the gateway URL to connect to.
    pub async fn gateway_url(&self) -> Result<String, RestError> {
        #[derive(Deserialize)]
        struct Gateway {
            url: String,
        }
        let gateway: Gateway = self
            .call(Method::GET, "GET /gateway/bot", "", "/gateway/bot", None)
            .await?;
        Ok(gateway.url)
    }

    /// Posts `content` in `channel`, mentioning nobody (an agent cannot ping @everyone).
    pub async fn create_message(&self, channel: &str, content: &str) -> Result<Message, RestError> {
        let body = json!({"content": content, "allowed_mentions": {"parse": []}});
        self.call(
            Method::POST,
            "POST /channels/{id}/messages",
            channel,
            &format!("/channels/{channel}/messages"),
            Some(&body),
        )
        .await
    }

    /// Shows the bot typing in `channel` (for ten seconds, or until it sends).
    pub async fn typing(&self, channel: &str) -> Result<(), RestError> {
        self.call::<Value>(
            Method::POST,
            "POST /channels/{id}/typing",
            channel,
            &format!("/channels/{channel}/typing"),
            None,
        )
        .await
        .map(drop)
    }

    /// One request on `route` (its template, which names its rate-limit bucket) with the
    /// major parameter `major`, waiting for the bucket and out 429s.
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        route: &'static str,
        major: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, RestError> {
        let mut waits = 0;
        loop {
            let wait = self.wait_for(route, major);
            if wait > MAX_WAIT {
                return Err(RestError::RateLimited {
                    what: route.to_owned(),
                    retry_after: wait.as_secs_f64(),
                });
            }
            if !wait.is_zero() {
                tracing::debug!(%route, ?wait, "Discord bucket empty: waiting for its reset");
                tokio::time::sleep(wait).await;
            }
            let mut request = self
                .http
                .request(method.clone(), format!("{}{path}", self.base))
                .timeout(REQUEST_WAIT)
                .header("Authorization", &self.authorization)
                .header("User-Agent", USER_AGENT);
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request
                .send()
                .await
                .map_err(|e| RestError::Transport(format!("{route}: {}", e.without_url())))?;
            let status = response.status().as_u16();
            self.learn(route, major, response.headers());
            let header_retry = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<f64>().ok());
            let text = response
                .text()
                .await
                .map_err(|e| RestError::Transport(format!("{route}: {}", e.without_url())))?;
            if (200..300).contains(&status) {
                let value = if text.trim().is_empty() {
                    Value::Null
                } else {
                    serde_json::from_str(&text).map_err(|_| {
                        RestError::Transport(format!(
                            "{route}: HTTP {status} with a body that is not JSON"
                        ))
                    })?
                };
                return serde_json::from_value(value).map_err(|e| {
                    RestError::Transport(format!("{route}: an answer reef cannot read ({e})"))
                });
            }
            let error: ErrorBody = serde_json::from_str(&text).unwrap_or(ErrorBody {
                message: String::new(),
                retry_after: None,
                global: false,
            });
            match status {
                429 => {
                    let retry_after = error.retry_after.or(header_retry).unwrap_or(1.0).max(0.0);
                    waits += 1;
                    let after =
                        Duration::from_secs_f64(retry_after.min(MAX_WAIT.as_secs_f64() + 1.0));
                    if waits > MAX_RATE_WAITS || after > MAX_WAIT {
                        return Err(RestError::RateLimited {
                            what: route.to_owned(),
                            retry_after,
                        });
                    }
                    tracing::info!(%route, retry_after, global = error.global, "Discord rate limit: waiting");
                    if error.global {
                        self.lock().global_until = Some(Instant::now() + after);
                    }
                    tokio::time::sleep(after).await;
                }
                401 => {
                    return Err(RestError::Unauthorized(format!(
                        "HTTP 401 {}",
                        error.message
                    )));
                }
                400..=499 => {
                    return Err(RestError::Refused {
                        what: route.to_owned(),
                        status,
                        message: error.message,
                    });
                }
                _ => {
                    return Err(RestError::Transport(format!(
                        "{route}: HTTP {status} {}",
                        error.message
                    )));
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Limits> {
        self.limits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long a request on `route` must wait before it goes.
    fn wait_for(&self, route: &'static str, major: &str) -> Duration {
        let limits = self.lock();
        let now = Instant::now();
        let global = limits
            .global_until
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now));
        let key = bucket_key(&limits, route, major);
        let bucket = limits
            .buckets
            .get(&key)
            .filter(|b| b.remaining == 0)
            .map_or(Duration::ZERO, |b| {
                b.reset_at.saturating_duration_since(now)
            });
        global.max(bucket)
    }

    /// Keeps what an answer's headers say of its bucket.
    fn learn(&self, route: &'static str, major: &str, headers: &reqwest::header::HeaderMap) {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let mut limits = self.lock();
        if let Some(hash) = text("x-ratelimit-bucket") {
            limits.hashes.insert(route, hash.to_owned());
        }
        let remaining = text("x-ratelimit-remaining").and_then(|v| v.parse::<u64>().ok());
        let reset_after = text("x-ratelimit-reset-after")
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0);
        if let (Some(remaining), Some(reset_after)) = (remaining, reset_after) {
            let key = bucket_key(&limits, route, major);
            let reset_at = Instant::now() + Duration::from_secs_f64(reset_after.min(3600.0));
            limits.buckets.insert(
                key,
                Bucket {
                    remaining,
                    reset_at,
                },
            );
            // Forget buckets long refilled.
            let now = Instant::now();
            limits.buckets.retain(|_, b| b.reset_at > now);
        }
    }
}

fn bucket_key(limits: &Limits, route: &'static str, major: &str) -> String {
    match limits.hashes.get(route) {
        Some(hash) => format!("{hash}:{major}"),
        None => format!("{route}:{major}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_bucket_makes_its_route_wait_and_others_not() {
        // reqwest takes the process's TLS provider; this test sends nothing.
        let _already = rustls::crypto::ring::default_provider().install_default();
        let rest = Rest::new(reqwest::Client::new(), "http://127.0.0.1:1", "t");
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-ratelimit-bucket", "abc".parse().unwrap());
        headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
        headers.insert("x-ratelimit-reset-after", "2.5".parse().unwrap());
        rest.learn("POST /channels/{id}/messages", "1", &headers);
        let wait = rest.wait_for("POST /channels/{id}/messages", "1");
        assert!(
            wait > Duration::from_secs(2) && wait <= Duration::from_millis(2500),
            "{wait:?}"
        );
        // Another channel is another bucket.
        assert_eq!(
            rest.wait_for("POST /channels/{id}/messages", "2"),
            Duration::ZERO
        );
        headers.insert("x-ratelimit-remaining", "4".parse().unwrap());
        rest.learn("POST /channels/{id}/messages", "1", &headers);
        assert_eq!(
            rest.wait_for("POST /channels/{id}/messages", "1"),
            Duration::ZERO
        );
    }
}
