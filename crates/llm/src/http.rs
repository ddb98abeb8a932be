//! HTTP plumbing shared by both wire APIs: the rustls/ring `reqwest::Client` builder, and a
//! `Transport` that posts JSON, turns HTTP failures into `ModelError`s and reads SSE streams
//! under the configured timeouts.

use crate::error::LlmError;
use crate::retry::{classify_status, error_excerpt, parse_retry_after};
use crate::settings::ProviderSettings;
use crate::sse::{SseEvent, SseParser};
use futures::StreamExt;
use reef_core::{ModelError, ModelErrorKind, ModelResponse, OnDelta};
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Limit for establishing a TCP/TLS connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of an error response's body kept for the error message (an excerpt is shown).
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// Longest wait for each chunk of an error response's body.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(10);

/// A `reqwest::Client` using rustls with the ring provider and the system's root certificates
/// (via rustls-native-certs, which honours `SSL_CERT_FILE` / `SSL_CERT_DIR`). `timeout`, when
/// given, limits each whole request. Fails with `NoRootCertificates` if none can be loaded.
pub fn http_client(timeout: Option<Duration>) -> Result<reqwest::Client, LlmError> {
    build_http_client(timeout, true)
}

/// Like `http_client`, but never following a redirect: for requests that carry credentials
/// in headers of their own (reqwest drops only `Authorization` when a redirect changes host).
pub fn http_client_without_redirects(
    timeout: Option<Duration>,
) -> Result<reqwest::Client, LlmError> {
    builder(timeout, true)?
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| LlmError::HttpClient(error_chain(&e)))
}

/// Like `http_client`; with `require_roots` false a missing CA bundle is tolerated (the client
/// then cannot verify any TLS server, which is fine for plain-http local providers).
pub(crate) fn build_http_client(
    timeout: Option<Duration>,
    require_roots: bool,
) -> Result<reqwest::Client, LlmError> {
    builder(timeout, require_roots)?
        .build()
        .map_err(|e| LlmError::HttpClient(error_chain(&e)))
}

fn builder(
    timeout: Option<Duration>,
    require_roots: bool,
) -> Result<reqwest::ClientBuilder, LlmError> {
    let tls = tls_config(require_roots)?;
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("reef/", env!("CARGO_PKG_VERSION")));
    if let Some(t) = timeout {
        builder = builder.timeout(t);
    }
    Ok(builder)
}

fn tls_config(require_roots: bool) -> Result<rustls::ClientConfig, LlmError> {
    let loaded = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
    if added == 0 && require_roots {
        let details = if loaded.errors.is_empty() {
            "the system certificate store is empty".to_owned()
        } else {
            loaded
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        };
        return Err(LlmError::NoRootCertificates { details });
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| LlmError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Checks that `base_url` is an absolute http(s) URL with a host.
pub(crate) fn validate_base_url(settings: &ProviderSettings) -> Result<reqwest::Url, LlmError> {
    let invalid = |reason: String| LlmError::InvalidBaseUrl {
        provider: settings.name.clone(),
        url: settings.base_url.clone(),
        reason,
    };
    let url = reqwest::Url::parse(&settings.base_url).map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "scheme `{}` is not http or https",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host".to_owned()));
    }
    Ok(url)
}

/// A reqwest error with its sources, e.g. "error sending request: connection refused".
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// One provider's HTTP side: settings plus a client.
#[derive(Debug)]
pub(crate) struct Transport {
    pub settings: ProviderSettings,
    client: reqwest::Client,
}

impl Transport {
    pub fn new(settings: ProviderSettings) -> Result<Self, LlmError> {
        let url = validate_base_url(&settings)?;
        let client = build_http_client(None, url.scheme() == "https")?;
        Ok(Self { settings, client })
    }

    /// `Authorization: Bearer KEY` when a key is configured (OpenAI-compatible and Ollama).
    pub fn bearer_headers(&self) -> Vec<(&'static str, String)> {
        match &self.settings.api_key {
            Some(key) => vec![("authorization", format!("Bearer {key}"))],
            None => Vec::new(),
        }
    }

    pub fn error(&self, kind: ModelErrorKind, message: impl Into<String>) -> ModelError {
        ModelError::new(self.settings.name.clone(), kind, message)
    }

    pub fn timeout_error(&self, what: &str) -> ModelError {
        self.error(
            ModelErrorKind::Timeout,
            format!(
                "{what} after {} s",
                self.settings.request_timeout.as_secs_f32()
            ),
        )
    }

    /// A transport-level reqwest failure as a `ModelError`.
    pub fn reqwest_error(&self, err: &reqwest::Error) -> ModelError {
        let kind = if err.is_builder() {
            // The request itself could not be built (e.g. an API key with a newline in it):
            // sending it again cannot help.
            ModelErrorKind::BadRequest
        } else if err.is_timeout() {
            ModelErrorKind::Timeout
        } else if err.is_decode() {
            ModelErrorKind::Malformed
        } else {
            ModelErrorKind::Connection
        };
        self.error(kind, error_chain(err))
    }

    /// POSTs `body` to `{base_url}{path}`; any non-2xx status becomes a `ModelError` carrying
    /// the status, an excerpt of the body and `Retry-After`. No timeout of its own.
    pub async fn post(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: &Value,
    ) -> Result<reqwest::Response, ModelError> {
        let mut request = self
            .client
            .post(self.settings.endpoint(path))
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request.send().await.map_err(|e| self.reqwest_error(&e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        Err(self.status_error(response).await)
    }

    /// Builds the error for a non-success response, reading (a bounded part of) its body.
    pub async fn status_error(&self, response: reqwest::Response) -> ModelError {
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let body = read_error_body(response).await;
        let mut err = self
            .error(classify_status(status, &body), error_excerpt(&body))
            .with_status(status);
        err.retry_after_secs = retry_after;
        err
    }

    /// A non-streamed request: POST and parse the JSON reply, all within `request_timeout`.
    pub async fn post_for_json(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: &Value,
    ) -> Result<Value, ModelError> {
        let work = async {
            let response = self.post(path, headers, body).await?;
            self.read_json(response).await
        };
        tokio::time::timeout(self.settings.request_timeout, work)
            .await
            .map_err(|_| self.timeout_error("no complete reply"))?
    }

    /// Reads a whole body (within `request_timeout`) as JSON; an unparseable body is
    /// `Malformed`.
    pub async fn read_json(&self, response: reqwest::Response) -> Result<Value, ModelError> {
        let bytes = tokio::time::timeout(self.settings.request_timeout, response.bytes())
            .await
            .map_err(|_| self.timeout_error("no complete reply"))?
            .map_err(|e| self.reqwest_error(&e))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            let text = String::from_utf8_lossy(&bytes);
            self.error(
                ModelErrorKind::Malformed,
                format!("invalid JSON reply ({e}): {}", error_excerpt(&text)),
            )
        })
    }

    /// A streamed request: POST and wait for the response headers within `request_timeout`.
    pub async fn open_stream(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: &Value,
    ) -> Result<reqwest::Response, ModelError> {
        tokio::time::timeout(
            self.settings.request_timeout,
            self.post(path, headers, body),
        )
        .await
        .map_err(|_| self.timeout_error("no response headers"))?
    }

    /// Feeds each SSE event of `response` to `on_event` until it returns `true` (the wire's
    /// terminal event). Waiting longer than `request_timeout` for a chunk is `Timeout`; the
    /// body ending before the terminal event is `Malformed`.
    pub async fn read_events(
        &self,
        response: reqwest::Response,
        mut on_event: impl FnMut(SseEvent) -> Result<bool, ModelError>,
    ) -> Result<(), ModelError> {
        let mut parser = SseParser::new();
        let mut stream = response.bytes_stream();
        loop {
            let next = tokio::time::timeout(self.settings.request_timeout, stream.next())
                .await
                .map_err(|_| self.timeout_error("stream stalled: no data"))?;
            let ended = next.is_none();
            let events = match next {
                Some(Ok(chunk)) => parser.feed(&chunk),
                Some(Err(e)) => return Err(self.reqwest_error(&e)),
                None => parser.finish().into_iter().collect(),
            };
            for event in events {
                if on_event(event)? {
                    return Ok(());
                }
            }
            if ended {
                return Err(self.error(
                    ModelErrorKind::Malformed,
                    "the stream ended before its final event",
                ));
            }
        }
    }
}

/// The first `ERROR_BODY_LIMIT` bytes of an error response, as lossy UTF-8: only an excerpt
/// is kept, so a huge or never-ending error body is neither buffered whole nor waited for.
/// A body that fails mid-way yields what arrived before the failure.
async fn read_error_body(response: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while body.len() < ERROR_BODY_LIMIT {
        match tokio::time::timeout(ERROR_BODY_WAIT, stream.next()).await {
            Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
            Ok(Some(Err(_)) | None) | Err(_) => break,
        }
    }
    body.truncate(ERROR_BODY_LIMIT);
    String::from_utf8_lossy(&body).into_owned()
}

/// Whether a response is an event stream (servers may ignore `stream: true` and send JSON).
pub(crate) fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|ct| !ct.to_ascii_lowercase().starts_with("application/json"))
}

/// How one wire format turns a provider's reply into a `ModelResponse`: event by event from a
/// stream, or from a whole JSON body (non-streaming requests, and servers that ignore `stream`).
pub(crate) trait Assemble: Default {
    /// Takes one SSE event; `Ok(true)` when it was the terminal event.
    fn event(
        &mut self,
        t: &Transport,
        event: &SseEvent,
        on_delta: &OnDelta<'_>,
    ) -> Result<bool, ModelError>;

    /// The assembled reply once the terminal event arrived.
    fn finish(self, fallback_model: &str) -> ModelResponse;

    /// A complete JSON reply; its text is passed to `on_delta` once.
    fn whole(
        t: &Transport,
        reply: &Value,
        fallback_model: &str,
        on_delta: &OnDelta<'_>,
    ) -> Result<ModelResponse, ModelError>;
}

impl Transport {
    /// One attempt of a model request in wire format `A`, streamed or not as configured.
    pub(crate) async fn exchange<A: Assemble>(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: &Value,
        on_delta: &OnDelta<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let fallback_model = &self.settings.model;
        if !self.settings.stream {
            let reply = self.post_for_json(path, headers, body).await?;
            return A::whole(self, &reply, fallback_model, on_delta);
        }
        let response = self.open_stream(path, headers, body).await?;
        if !is_event_stream(&response) {
            let reply = self.read_json(response).await?;
            return A::whole(self, &reply, fallback_model, on_delta);
        }
        let mut state = A::default();
        self.read_events(response, |event| state.event(self, &event, on_delta))
            .await?;
        Ok(state.finish(fallback_model))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_validated() {
        let with = |url: &str| ProviderSettings {
            base_url: url.into(),
            ..ProviderSettings::default()
        };
        assert!(validate_base_url(&with("http://127.0.0.1:8080/v1")).is_ok());
        assert!(validate_base_url(&with("https://api.openai.com/v1/")).is_ok());
        let err = validate_base_url(&with("ftp://x/v1"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`main`") && err.contains("ftp"), "{err}");
        assert!(validate_base_url(&with("not a url")).is_err());
    }

    #[test]
    fn plain_http_transport_needs_no_root_certificates() {
        let t = Transport::new(ProviderSettings::default());
        assert!(t.is_ok(), "{t:?}");
    }
}
