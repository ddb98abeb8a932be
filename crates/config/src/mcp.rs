//! `[mcp]`: the MCP servers agents may use, how each is reached (a program run in the
//! sandbox, or a URL), what a program may touch, and which agents get it.

use crate::error::ConfigError;
use crate::sandbox::{NetworkModeName, check_domain, writable_paths};
use reef_core::SecretSpec;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The longest server name: it prefixes each of its tools' names (`NAME__TOOL`), which
/// models accept up to 64 characters.
pub const MAX_SERVER_NAME: usize = 24;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpToml {
    pub max_tools_per_server: Option<usize>,
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerToml>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct McpServerToml {
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, ValueToml>,
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, ValueToml>,
    pub bearer_token_secret: Option<String>,
    pub timeout_secs: Option<u64>,
    pub enabled: Option<bool>,
    pub templates: Option<Vec<String>>,
    pub network: Option<NetworkModeName>,
    pub allow_domains: Option<Vec<String>>,
    pub writable: Option<Vec<String>>,
    pub read_only: Option<Vec<String>>,
}

/// `NAME = "value"` or `NAME = { secret = "SECRET" }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum ValueToml {
    Plain(String),
    Secret { secret: String },
}

/// The resolved `[mcp]` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpConfig {
    /// A server's tools beyond this many are left out, with a warning.
    pub max_tools_per_server: usize,
    /// `[mcp.servers.NAME]`, by name.
    pub servers: BTreeMap<String, McpServerConfig>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            max_tools_per_server: 128,
            servers: BTreeMap::new(),
        }
    }
}

/// One `[mcp.servers.NAME]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct McpServerConfig {
    pub name: String,
    pub transport: McpTransport,
    /// How long a request (initialize included) may take before it fails.
    pub timeout_secs: u64,
    /// `false`: configured, but no agent gets it and it never starts.
    pub enabled: bool,
    /// The templates whose agents get it; `None`: every agent.
    pub templates: Option<Vec<String>>,
    /// A program's network, instead of `[sandbox] network`.
    pub network: Option<NetworkModeName>,
    /// A program's reachable domains, instead of `[sandbox] allow_domains`.
    pub allow_domains: Option<Vec<String>>,
    /// Paths a program may write besides its own directory, instead of `[sandbox] writable`.
    pub writable: Option<Vec<PathBuf>>,
    /// Paths a program may read (and run from) besides the system directories: its code, a
    /// virtualenv, a `node_modules`.
    pub read_only: Vec<PathBuf>,
}

impl McpServerConfig {
    /// Whether agents of `template` get this server (when it is enabled).
    pub fn offered_to(&self, template: &str) -> bool {
        self.enabled
            && self
                .templates
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n == template))
    }
}

/// How a server is reached.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum McpTransport {
    /// A program reef starts in its sandbox and speaks to over stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, ConfigValue)>,
    },
    /// A server reached over streamable HTTP.
    Http {
        url: String,
        headers: Vec<(String, ConfigValue)>,
        /// A `[secrets]` name whose value is sent as `Authorization: Bearer …`.
        bearer_token_secret: Option<String>,
    },
}

/// A value given in the configuration, or the name of a `[secrets]` entry holding it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConfigValue {
    Plain(String),
    Secret(String),
}

/// Whether `name` can name a server: letters, digits, `-` and single `_` inside, at most
/// [`MAX_SERVER_NAME`] characters (`__` separates it from a tool's name, so no `_` may touch
/// it either).
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER_NAME
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

pub(crate) fn resolve(
    raw: McpToml,
    secrets: &[SecretSpec],
    env: &BTreeMap<String, String>,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<McpConfig, ConfigError> {
    let max_tools_per_server = raw.max_tools_per_server.unwrap_or(128);
    if !(1..=10_000).contains(&max_tools_per_server) {
        return Err(ConfigError::Invalid {
            origin: origin_of("mcp.max_tools_per_server"),
            key: "mcp.max_tools_per_server".into(),
            message: format!("{max_tools_per_server} is not between 1 and 10000"),
        });
    }
    let mut servers = BTreeMap::new();
    for (name, server) in raw.servers {
        let resolved = resolve_server(&name, server, secrets, env, origin_of)?;
        servers.insert(name, resolved);
    }
    Ok(McpConfig {
        max_tools_per_server,
        servers,
    })
}

fn resolve_server(
    name: &str,
    raw: McpServerToml,
    secrets: &[SecretSpec],
    env: &BTreeMap<String, String>,
    origin_of: &dyn Fn(&str) -> String,
) -> Result<McpServerConfig, ConfigError> {
    let invalid = |field: &str, message: String| {
        let key = if field.is_empty() {
            format!("mcp.servers.{name}")
        } else {
            format!("mcp.servers.{name}.{field}")
        };
        ConfigError::Invalid {
            origin: origin_of(&key),
            key,
            message,
        }
    };
    if !valid_server_name(name) {
        return Err(invalid(
            "",
            format!(
                "`{name}` cannot name a server: use letters, digits, - and _ (not __), at most \
                 {MAX_SERVER_NAME} characters; it prefixes the server's tools as NAME__TOOL"
            ),
        ));
    }
    let values = |field: &str, raw: BTreeMap<String, ValueToml>| {
        let mut out = Vec::with_capacity(raw.len());
        for (key, value) in raw {
            let value = match value {
                ValueToml::Plain(v) => ConfigValue::Plain(v),
                ValueToml::Secret { secret } => {
                    known_secret(&secret, secrets)
                        .map_err(|m| invalid(&format!("{field}.{key}"), m))?;
                    ConfigValue::Secret(secret)
                }
            };
            out.push((key, value));
        }
        Ok::<_, ConfigError>(out)
    };
    let transport = match (raw.command, raw.url) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "url",
                "set either `command` (a program reef runs) or `url` (a server reached over \
                 HTTP), not both"
                    .into(),
            ));
        }
        (None, None) => {
            return Err(invalid(
                "",
                "needs `command` (a program reef runs) or `url` (a server reached over HTTP)"
                    .into(),
            ));
        }
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(invalid("command", "is empty".into()));
            }
            for (field, set) in [
                ("headers", !raw.headers.is_empty()),
                ("bearer_token_secret", raw.bearer_token_secret.is_some()),
            ] {
                if set {
                    return Err(invalid(
                        field,
                        "applies to a server reached by `url`, not to a `command`".into(),
                    ));
                }
            }
            for key in raw.env.keys() {
                if !crate::secrets::is_env_name(key) {
                    return Err(invalid(
                        &format!("env.{key}"),
                        "is not an environment variable name".into(),
                    ));
                }
            }
            McpTransport::Stdio {
                command,
                args: raw.args.unwrap_or_default(),
                env: values("env", raw.env)?,
            }
        }
        (None, Some(url)) => {
            for (field, set) in [
                ("args", raw.args.is_some()),
                ("env", !raw.env.is_empty()),
                ("network", raw.network.is_some()),
                ("allow_domains", raw.allow_domains.is_some()),
                ("writable", raw.writable.is_some()),
                ("read_only", raw.read_only.is_some()),
            ] {
                if set {
                    return Err(invalid(
                        field,
                        "applies to a program reef runs (`command`), not to a `url`".into(),
                    ));
                }
            }
            check_url(&url).map_err(|m| invalid("url", m))?;
            if let Some(secret) = &raw.bearer_token_secret {
                known_secret(secret, secrets).map_err(|m| invalid("bearer_token_secret", m))?;
            }
            for key in raw.headers.keys() {
                let token = !key.is_empty()
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if !token {
                    return Err(invalid(
                        &format!("headers.{key}"),
                        "is not an HTTP header name".into(),
                    ));
                }
            }
            McpTransport::Http {
                url,
                headers: values("headers", raw.headers)?,
                bearer_token_secret: raw.bearer_token_secret,
            }
        }
    };
    let timeout_secs = raw.timeout_secs.unwrap_or(60);
    if !(1..=3600).contains(&timeout_secs) {
        return Err(invalid(
            "timeout_secs",
            format!("{timeout_secs} is not between 1 and 3600 seconds"),
        ));
    }
    if let Some(templates) = &raw.templates
        && let Some(bad) = templates.iter().find(|t| t.trim().is_empty())
    {
        return Err(invalid(
            "templates",
            format!("{bad:?} is not a template name"),
        ));
    }
    for domain in raw.allow_domains.iter().flatten() {
        check_domain(domain).map_err(|m| invalid("allow_domains", m))?;
    }
    let writable = raw
        .writable
        .map(|paths| writable_paths(paths, env))
        .transpose()
        .map_err(|m| invalid("writable", m))?;
    let read_only = writable_paths(raw.read_only.unwrap_or_default(), env)
        .map_err(|m| invalid("read_only", m))?;
    Ok(McpServerConfig {
        name: name.to_owned(),
        transport,
        timeout_secs,
        enabled: raw.enabled.unwrap_or(true),
        templates: raw.templates,
        network: raw.network,
        allow_domains: raw.allow_domains,
        writable,
        read_only,
    })
}

fn known_secret(name: &str, secrets: &[SecretSpec]) -> Result<(), String> {
    if secrets.iter().any(|s| s.name == name) {
        Ok(())
    } else {
        Err(format!(
            "names the secret `{name}`, but no [secrets.{name}] is defined"
        ))
    }
}

fn check_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| format!("`{url}` is not an http:// or https:// URL"))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.contains('@') || url.chars().any(char::is_whitespace) {
        return Err(format!(
            "`{url}` is not a URL with a host (credentials in the URL are not accepted: use \
             bearer_token_secret or headers)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_leave_room_for_tool_names() {
        for ok in ["fs", "git-hub", "a_b", "x1"] {
            assert!(valid_server_name(ok), "{ok}");
        }
        for bad in [
            "",
            "a__b",
            "gh_",
            "_x",
            "has space",
            "dots.no",
            &"n".repeat(MAX_SERVER_NAME + 1),
        ] {
            assert!(!valid_server_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn urls_need_a_scheme_and_a_host_without_credentials() {
        assert!(check_url("https://mcp.example.com/mcp").is_ok());
        assert!(check_url("http://127.0.0.1:8080/mcp").is_ok());
        for bad in [
            "ftp://x",
            "https://",
            "https://user:pw@host/",
            "example.com/mcp",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }
}
