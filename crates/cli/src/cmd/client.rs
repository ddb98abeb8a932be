//! The daemon's client: where `reef serve` listens (`$REEF_HOME/reef.addr`, else
//! `daemon.listen`), over TLS with the daemon's certificate pinned when it serves https, the
//! token from `$REEF_HOME/api-token`, and JSON requests whose failures become errors with the
//! daemon's message and a fitting exit code.

use crate::exit::{self, Exit};
use anyhow::Context as _;
use reef_config::Config;
use serde_json::Value;
use std::time::Duration;

pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Client {
    pub fn connect(config: &Config) -> anyhow::Result<Client> {
        let addr = match std::fs::read_to_string(config.home.join("reef.addr")) {
            Ok(addr) => {
                // A daemon killed without cleaning up leaves its address behind; whatever
                // listens there now must not be sent the token.
                if !daemon_alive(&config.home.join("reef.pid")) {
                    return Err(Exit::usage(format!(
                        "the reef daemon for {} is not running (its address file is stale); \
                         start it with `reef serve`",
                        config.home.display()
                    )));
                }
                addr.trim().to_owned()
            }
            Err(_) if config.daemon.tls.is_some() => format!("https://{}", config.daemon.listen),
            Err(_) => config.daemon.listen.to_string(),
        };
        let token_path = config.home.join("api-token");
        let token = std::fs::read_to_string(&token_path)
            .map(|t| t.trim().to_owned())
            .map_err(|e| {
                Exit::usage(format!(
                    "cannot read the API token {} ({e}); start the daemon with `reef serve`",
                    token_path.display()
                ))
            })?;
        let timeout = Some(Duration::from_secs(120));
        let (base, http) = match addr.strip_prefix("https://") {
            // The daemon's own certificate, pinned: a self-signed one is trusted for exactly
            // this daemon, whatever address it is reached at.
            Some(rest) => {
                let source = config.daemon.tls.as_ref().ok_or_else(|| {
                    Exit::usage(format!(
                        "the daemon serves https at {rest}, but this configuration has no \
                         [daemon.tls]; use the daemon's configuration"
                    ))
                })?;
                let pin = reef_server::tls::client_pin(source, &config.home).map_err(|e| {
                    Exit::usage(format!("cannot read the daemon's certificate: {e}"))
                })?;
                let http = reef_llm::http_client_pinned(timeout, pin)
                    .context("cannot build an HTTP client")?;
                (format!("https://{rest}"), http)
            }
            None => {
                let http = reef_llm::http_client(timeout).context("cannot build an HTTP client")?;
                (format!("http://{addr}"), http)
            }
        };
        Ok(Client { base, token, http })
    }

    /// `http://ADDR` (or `https://ADDR`) of the daemon.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The API token.
    pub fn token(&self) -> &str {
        &self.token
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        self.call(reqwest::Method::POST, path, body).await
    }

    pub async fn put(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.call(reqwest::Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.call(reqwest::Method::DELETE, path, None).await
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        self.request(method, path, body, exit::RUNTIME).await
    }

    /// A request whose `409 Conflict` (the target is not in a state for it) exits with
    /// `conflict`.
    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        conflict: u8,
    ) -> anyhow::Result<Value> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_connect() {
                anyhow::Error::new(Exit {
                    code: exit::RUNTIME,
                    message: format!(
                        "cannot reach the reef daemon at {} ({e}); start it with `reef serve`",
                        self.base
                    ),
                })
            } else {
                anyhow::Error::new(e).context("the request to the daemon failed")
            }
        })?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(value);
        }
        let message = value
            .get("error")
            .and_then(Value::as_str)
            .map_or_else(|| format!("the daemon answered {status}"), str::to_owned);
        let code = match status.as_u16() {
            400 | 401 | 403 | 404 => exit::USAGE,
            409 => conflict,
            _ => exit::RUNTIME,
        };
        Err(anyhow::Error::new(Exit { code, message }))
    }
}

/// A client of the daemon of the home the configuration (with `overrides`) names.
pub fn for_home(overrides: &[String]) -> anyhow::Result<Client> {
    Client::connect(&crate::home::load_config(overrides)?)
}

/// The daemon's JSON, pretty-printed on stdout.
pub fn print_json(value: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

/// A string field of the daemon's JSON, `-` when it is absent.
pub fn field<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("-")
}

/// A path segment with the characters a URL path cannot carry escaped (`#` in room names).
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Whether the pid in `reef.pid` is a live reef process.
/// Whether a daemon serves this home: its address file is there and its process alive.
pub fn daemon_running(config: &Config) -> bool {
    config.home.join("reef.addr").is_file() && daemon_alive(&config.home.join("reef.pid"))
}

fn daemon_alive(pid_file: &std::path::Path) -> bool {
    std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .and_then(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
        .is_some_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("reef"))
}
