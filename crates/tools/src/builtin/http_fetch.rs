//! `http_fetch`: fetches a URL (GET or POST) with SSRF checks on every hop and returns the
//! status, content type and body (HTML rendered as text).

use crate::args::parse_args;
use crate::args::str_arg;
use crate::builtin::BuiltinConfig;
use crate::builtin::net::{describe, pinned_client, read_capped, tls_config};
use crate::text::looks_binary;
use async_trait::async_trait;
use reef_core::{Need, Tool, ToolContext, ToolError, ToolSpec};
use reef_security::SsrfPolicy;
use reqwest::header::{
    AUTHORIZATION, CONTENT_TYPE, COOKIE, HeaderMap, HeaderName, HeaderValue, LOCATION,
    PROXY_AUTHORIZATION,
};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;
use url::Url;

const MAX_REDIRECTS: usize = 5;
const HTML_WIDTH: usize = 100;

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
enum HttpMethod {
    #[serde(rename = "GET", alias = "get")]
    Get,
    #[serde(rename = "POST", alias = "post")]
    Post,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    url: String,
    #[serde(default)]
    method: Option<HttpMethod>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

pub(crate) struct HttpFetchTool {
    policy: SsrfPolicy,
    timeout_secs: u64,
    max_bytes: usize,
    tls: OnceLock<Result<rustls::ClientConfig, String>>,
}

impl HttpFetchTool {
    pub(crate) fn new(config: &BuiltinConfig) -> Self {
        Self {
            policy: SsrfPolicy {
                allow_private: config.http_allow_private,
                allow_hosts: Vec::new(),
            },
            timeout_secs: config.http_timeout_secs,
            max_bytes: config.http_max_bytes,
            tls: OnceLock::new(),
        }
    }

    fn tls(&self) -> Result<&rustls::ClientConfig, ToolError> {
        self.tls
            .get_or_init(tls_config)
            .as_ref()
            .map_err(|err| ToolError::Failed(err.clone()))
    }

    async fn fetch(&self, args: Args) -> Result<String, ToolError> {
        let mut url = Url::parse(&args.url).map_err(|err| {
            ToolError::InvalidArguments(format!("url {:?} is not a valid URL: {err}", args.url))
        })?;
        let mut method = args.method.unwrap_or(HttpMethod::Get);
        if method == HttpMethod::Get && args.body.is_some() {
            return Err(ToolError::InvalidArguments(
                "body is only allowed with method POST".into(),
            ));
        }
        let mut body = args.body;
        let mut headers = build_headers(&args.headers)?;
        let tls = self.tls()?;
        let timeout = Duration::from_secs(self.timeout_secs);

        for hop in 0..=MAX_REDIRECTS {
            let client = pinned_client(&self.policy, &url, tls, timeout).await?;
            let reqwest_method = match method {
                HttpMethod::Get => Method::GET,
                HttpMethod::Post => Method::POST,
            };
            let mut request = client
                .request(reqwest_method, url.clone())
                .headers(headers.clone());
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let resp = request
                .send()
                .await
                .map_err(|err| self.request_error(&url, &err))?;
            let status = resp.status();
            let location = resp.headers().get(LOCATION).cloned();
            if let (true, Some(location)) = (status.is_redirection(), location) {
                if hop == MAX_REDIRECTS {
                    return Err(ToolError::Failed(format!(
                        "too many redirects (more than {MAX_REDIRECTS}), last at {url}"
                    )));
                }
                let next = location
                    .to_str()
                    .ok()
                    .and_then(|loc| url.join(loc).ok())
                    .ok_or_else(|| {
                        ToolError::Failed(format!("{url} redirected to an invalid Location"))
                    })?;
                if status == StatusCode::SEE_OTHER
                    || (method == HttpMethod::Post
                        && matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND))
                {
                    method = HttpMethod::Get;
                    body = None;
                }
                // Another host is another right: the agent's token was checked for this one.
                if next.host_str() != url.host_str() {
                    return Err(ToolError::Denied(format!(
                        "{url} redirects to another host, {next}; the redirect is not followed. \
                         Call http_fetch with that URL to fetch it"
                    )));
                }
                if next.origin() != url.origin() {
                    for name in [AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION] {
                        headers.remove(name);
                    }
                }
                url = next;
                continue;
            }
            return self.render(&url, hop > 0, resp).await;
        }
        Err(ToolError::Failed(format!(
            "too many redirects (more than {MAX_REDIRECTS})"
        )))
    }

    async fn render(
        &self,
        url: &Url,
        redirected: bool,
        resp: reqwest::Response,
    ) -> Result<String, ToolError> {
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let (bytes, truncated) = read_capped(resp, self.max_bytes)
            .await
            .map_err(|err| self.request_error(url, &err))?;

        let mut out = format!(
            "HTTP {} {}\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        if redirected {
            out.push_str(&format!("url: {url}\n"));
        }
        let shown_type = if content_type.is_empty() {
            "(none)"
        } else {
            &content_type
        };
        out.push_str(&format!("content-type: {shown_type}\n\n"));

        let mime = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if mime == "text/html" || mime == "application/xhtml+xml" {
            match html2text::from_read(bytes.as_slice(), HTML_WIDTH) {
                Ok(text) => out.push_str(&text),
                Err(_) => out.push_str(&String::from_utf8_lossy(&bytes)),
            }
        } else if looks_binary(&bytes) {
            out.push_str(&format!("[binary body of {} bytes not shown]", bytes.len()));
        } else {
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
        if truncated {
            out.push_str(&format!(
                "\n[... body truncated after {} bytes ...]\n",
                self.max_bytes
            ));
        }
        Ok(out)
    }

    fn request_error(&self, url: &Url, err: &reqwest::Error) -> ToolError {
        if err.is_timeout() {
            ToolError::Timeout(self.timeout_secs)
        } else {
            ToolError::Failed(format!("request to {url} failed: {}", describe(err)))
        }
    }
}

fn build_headers(headers: &BTreeMap<String, String>) -> Result<HeaderMap, ToolError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ToolError::InvalidArguments(format!("headers: {name:?} is not a valid header name"))
        })?;
        if header == reqwest::header::HOST {
            return Err(ToolError::InvalidArguments(
                "headers: Host is set from the url; it cannot be given".into(),
            ));
        }
        let value = HeaderValue::from_str(value).map_err(|_| {
            ToolError::InvalidArguments(format!("headers: the value of {name} is not valid"))
        })?;
        map.insert(header, value);
    }
    Ok(map)
}

#[async_trait]
impl Tool for HttpFetchTool {
    fn content_source(&self) -> Option<reef_core::ContentSource> {
        Some(reef_core::ContentSource::Fetched)
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "http_fetch".into(),
            description: format!(
                "Fetch an http(s) URL. Returns the status line, content type and body; HTML is \
                 converted to readable text. Bodies over {} bytes are cut. Requests to private, \
                 loopback and link-local addresses are {}. Redirects are followed (up to {MAX_REDIRECTS}), \
                 each hop checked again.",
                self.max_bytes,
                if self.policy.allow_private {
                    "allowed"
                } else {
                    "refused"
                }
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "Absolute http:// or https:// URL."},
                    "method": {"type": "string", "enum": ["GET", "POST"], "description": "HTTP method (default GET)."},
                    "body": {"type": "string", "description": "Request body; only with POST."},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra request headers, name to value."}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        }
    }

    fn needs(&self, args: &serde_json::Value) -> Vec<Need> {
        str_arg(args, "url")
            .and_then(|u| Url::parse(u).ok())
            .and_then(|u| u.host_str().map(|h| Need::Domain(h.to_owned())))
            .into_iter()
            .collect()
    }

    async fn call(&self, _ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let limit = Duration::from_secs(self.timeout_secs);
        tokio::time::timeout(limit, self.fetch(args))
            .await
            .map_err(|_| ToolError::Timeout(self.timeout_secs))?
    }
}
