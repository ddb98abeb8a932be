//! One outbound HTTP request under `http_fetch`'s SSRF rules (the URL checked, every resolved
//! address checked, the connection pinned to those addresses, no proxy, no redirect followed),
//! for reef code that makes requests on an agent's behalf, such as a WASM skill's host call.

use crate::builtin::net::{describe, pinned_client, read_capped, tls_config};
use reef_core::ToolError;
use reef_security::SsrfPolicy;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::sync::OnceLock;
use std::time::Duration;
use url::Url;

/// What came back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was longer than the limit and was cut.
    pub truncated: bool,
}

/// Sends single requests under an SSRF policy.
pub struct GuardedHttp {
    policy: SsrfPolicy,
    timeout: Duration,
    max_bytes: usize,
    tls: OnceLock<Result<rustls::ClientConfig, String>>,
}

impl std::fmt::Debug for GuardedHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedHttp")
            .field("policy", &self.policy)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl GuardedHttp {
    pub fn new(policy: SsrfPolicy, timeout: Duration, max_bytes: usize) -> Self {
        Self {
            policy,
            timeout,
            max_bytes,
            tls: OnceLock::new(),
        }
    }

    /// Sends `method url` with `headers` and `body`. A redirect is returned, not followed.
    pub async fn send(
        &self,
        method: &str,
        url: &Url,
        headers: &[(String, String)],
        body: Option<Vec<u8>>,
    ) -> Result<HttpReply, ToolError> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|_| {
            ToolError::InvalidArguments(format!("{method:?} is not an HTTP method"))
        })?;
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                ToolError::InvalidArguments(format!("{name:?} is not a valid header name"))
            })?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                ToolError::InvalidArguments(format!("the value of header {name} is not valid"))
            })?;
            map.append(name, value);
        }
        let tls = self
            .tls
            .get_or_init(tls_config)
            .as_ref()
            .map_err(|e| ToolError::Failed(e.clone()))?;
        let client = pinned_client(&self.policy, url, tls, self.timeout).await?;
        let mut request = client.request(method, url.clone()).headers(map);
        if let Some(body) = body {
            request = request.body(body);
        }
        let failed = |err: reqwest::Error| {
            if err.is_timeout() {
                ToolError::Timeout(self.timeout.as_secs())
            } else {
                ToolError::Failed(format!("request to {url} failed: {}", describe(&err)))
            }
        };
        let resp = request.send().await.map_err(failed)?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let (body, truncated) = read_capped(resp, self.max_bytes).await.map_err(failed)?;
        Ok(HttpReply {
            status,
            headers,
            body,
            truncated,
        })
    }
}
