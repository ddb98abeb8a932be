//! Retry policy: which failures are retried, how long to wait (exponential backoff with jitter,
//! or the provider's `Retry-After`), and the retry loop around one model request.

use crate::settings::ProviderSettings;
use reef_core::{ModelError, ModelErrorKind, OnStream, StreamEvent};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// The longest computed backoff.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The longest wait honoured from a `Retry-After` header.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Longest excerpt of a provider's error body kept in an error message.
pub const EXCERPT_CHARS: usize = 300;

/// Runs `attempt` until it succeeds, fails with a non-retryable error, or `max_retries`
/// extra attempts are used up. Each retry is logged with `tracing::warn!`.
///
/// A retried stream starts over: text deltas already passed to `on_delta` by a failed
/// attempt are passed again by the next one.
pub async fn with_retries<T, F, Fut>(
    settings: &ProviderSettings,
    on_event: &OnStream<'_>,
    mut attempt: F,
) -> Result<T, ModelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ModelError>>,
{
    let mut retries = 0;
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(err) if err.is_retryable() && retries < settings.max_retries => {
                let delay = retry_delay(settings.retry_base, retries, &err, jitter());
                retries += 1;
                tracing::warn!(
                    provider = %settings.name,
                    attempt = retries,
                    max_retries = settings.max_retries,
                    delay_ms = delay.as_millis() as u64,
                    error = %err,
                    "model request failed; retrying"
                );
                on_event(StreamEvent::Retrying {
                    attempt: retries,
                    error: &err,
                });
                tokio::time::sleep(delay).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// The wait before retry number `retry` (0-based): `Retry-After` (capped at 60 s) when the
/// provider sent one, else `base * 2^retry` reduced by up to 25 % jitter, capped at 30 s.
/// `jitter` is in `[0, 1)`.
pub fn retry_delay(base: Duration, retry: u32, err: &ModelError, jitter: f64) -> Duration {
    if let Some(secs) = err.retry_after_secs {
        return Duration::from_secs(secs).min(MAX_RETRY_AFTER);
    }
    let exp = base.saturating_mul(2u32.saturating_pow(retry.min(31)));
    exp.min(MAX_BACKOFF)
        .mul_f64(1.0 - 0.25 * jitter.clamp(0.0, 1.0))
}

/// A fresh pseudo-random number in `[0, 1)` (std's randomly keyed hasher; no crypto needed).
fn jitter() -> f64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(0x5eed);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `Retry-After` in its seconds form, rounded up when a provider sends a fraction (`0.5`);
/// the HTTP-date form is not supported (ignored, so the computed backoff applies).
pub fn parse_retry_after(value: &str) -> Option<u64> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(secs);
    }
    let secs: f64 = value.parse().ok()?;
    // `as` saturates; the wait is capped at MAX_RETRY_AFTER anyway.
    (secs.is_finite() && secs >= 0.0).then(|| secs.ceil() as u64)
}

/// The error class of a non-success HTTP status, given the response body.
pub fn classify_status(status: u16, body: &str) -> ModelErrorKind {
    match status {
        429 => ModelErrorKind::RateLimited,
        401 | 403 => ModelErrorKind::Auth,
        404 => ModelErrorKind::NotFound,
        408 => ModelErrorKind::Timeout,
        400 | 413 | 422 if mentions_context_length(body) => ModelErrorKind::ContextLength,
        500..=599 => ModelErrorKind::Server,
        _ => ModelErrorKind::BadRequest,
    }
}

fn mentions_context_length(body: &str) -> bool {
    let lower = body.to_lowercase();
    [
        "context length",
        "context_length",
        "maximum context",
        "context window",
        "prompt is too long",
        "too many tokens",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// A short excerpt of a provider's error body: `error.message` (or `message`) when the body
/// is JSON, else the text itself; at most 300 characters.
pub fn error_excerpt(body: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            let msg = v
                .pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("error"))?;
            Some(match msg {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    truncate(&text, EXCERPT_CHARS)
}

/// At most `max` characters, with `…` when cut.
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: ModelErrorKind, retry_after: Option<u64>) -> ModelError {
        let mut e = ModelError::new("p", kind, "x");
        e.retry_after_secs = retry_after;
        e
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let base = Duration::from_millis(500);
        let e = err(ModelErrorKind::Server, None);
        assert_eq!(retry_delay(base, 0, &e, 0.0), Duration::from_millis(500));
        assert_eq!(retry_delay(base, 1, &e, 0.0), Duration::from_millis(1000));
        assert_eq!(retry_delay(base, 2, &e, 0.0), Duration::from_millis(2000));
        assert_eq!(retry_delay(base, 1, &e, 1.0), Duration::from_millis(750));
        assert_eq!(retry_delay(base, 20, &e, 0.0), MAX_BACKOFF);
        assert_eq!(retry_delay(base, u32::MAX, &e, 0.0), MAX_BACKOFF);
        let j = jitter();
        assert!((0.0..1.0).contains(&j));
    }

    #[test]
    fn retry_after_wins_and_is_capped() {
        let base = Duration::from_millis(500);
        let zero = err(ModelErrorKind::RateLimited, Some(0));
        assert_eq!(retry_delay(base, 3, &zero, 0.5), Duration::ZERO);
        let long = err(ModelErrorKind::RateLimited, Some(3600));
        assert_eq!(retry_delay(base, 0, &long, 0.5), MAX_RETRY_AFTER);
        assert_eq!(parse_retry_after(" 12 "), Some(12));
        assert_eq!(parse_retry_after("0.2"), Some(1));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("NaN"), None);
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn statuses_are_classified() {
        use ModelErrorKind::*;
        assert_eq!(classify_status(429, ""), RateLimited);
        assert_eq!(classify_status(500, ""), Server);
        assert_eq!(classify_status(529, "overloaded"), Server);
        assert_eq!(classify_status(401, ""), Auth);
        assert_eq!(classify_status(403, ""), Auth);
        assert_eq!(classify_status(404, ""), NotFound);
        assert_eq!(classify_status(400, "bad field"), BadRequest);
        assert_eq!(
            classify_status(400, r#"{"error":{"code":"context_length_exceeded"}}"#),
            ContextLength
        );
        assert_eq!(
            classify_status(400, "This model's maximum context length is 8192 tokens"),
            ContextLength
        );
        assert_eq!(
            classify_status(400, "prompt is too long: 300000 tokens"),
            ContextLength
        );
        assert_eq!(classify_status(418, ""), BadRequest);
    }

    #[test]
    fn excerpts_prefer_error_message_and_are_short() {
        assert_eq!(
            error_excerpt(r#"{"error":{"message":"Invalid API key","type":"auth"}}"#),
            "Invalid API key"
        );
        assert_eq!(error_excerpt("  plain failure \n"), "plain failure");
        assert_eq!(error_excerpt(""), "(empty body)");
        let long = "é".repeat(1000);
        let ex = error_excerpt(&long);
        assert_eq!(ex.chars().count(), EXCERPT_CHARS + 1);
        assert!(ex.ends_with('…'));
    }
}
