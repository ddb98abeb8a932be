//! What the bot channels (Telegram, Discord, Slack) share in their configuration: a token
//! read by reference (an environment variable's name, or a `[secrets]` entry) and a
//! platform base URL that a self-hosted server or a test's fake may replace.

use crate::error::ConfigError;
use reef_core::{SecretPolicy, SecretSource, SecretSpec};

/// Where one credential is read from: `{prefix}_env` names an environment variable,
/// `{prefix}_secret` a `[secrets]` (or vault) entry; exactly one of them is given. `what`
/// says what the credential is, in the error when neither is.
pub(crate) fn credential(
    env: Option<&String>,
    secret: Option<&String>,
    prefix: &str,
    what: &str,
    key: &dyn Fn(&str) -> String,
    secrets: &[SecretSpec],
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<SecretSpec, ConfigError> {
    let env_key = format!("{prefix}_env");
    let secret_key = format!("{prefix}_secret");
    match (env, secret) {
        (Some(var), None) => {
            if var.is_empty() || var.contains(['=', '\0']) {
                return Err(invalid(
                    key(&env_key),
                    format!("`{var}` is not an environment variable's name"),
                ));
            }
            Ok(SecretSpec {
                name: key(prefix),
                source: SecretSource::Env(var.clone()),
                description: None,
                policy: SecretPolicy::default(),
            })
        }
        (None, Some(name)) => secrets
            .iter()
            .find(|s| &s.name == name)
            .cloned()
            .ok_or_else(|| {
                invalid(
                    key(&secret_key),
                    format!("names secret `{name}`, but no [secrets.{name}] is defined"),
                )
            }),
        (Some(_), Some(_)) => Err(invalid(
            key(&secret_key),
            format!("give {env_key} or {secret_key}, not both"),
        )),
        (None, None) => Err(invalid(
            key(&env_key),
            format!("missing: the environment variable holding {what} (or {secret_key})"),
        )),
    }
}

/// An `http(s)` base URL (`default` when not given), without its trailing slash.
pub(crate) fn base_url(
    value: Option<&String>,
    default: &str,
    field: &str,
    key: &dyn Fn(&str) -> String,
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<String, ConfigError> {
    let url = value.map_or(default, String::as_str);
    if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() < 10 {
        return Err(invalid(
            key(field),
            format!("`{url}` is not an http(s) URL"),
        ));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// A `ws(s)` URL, without its trailing slash.
pub(crate) fn websocket_url(
    url: &str,
    field: &str,
    key: &dyn Fn(&str) -> String,
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<String, ConfigError> {
    if !(url.starts_with("wss://") || url.starts_with("ws://")) || url.len() < 7 {
        return Err(invalid(
            key(field),
            format!("`{url}` is not a WebSocket (ws:// or wss://) URL"),
        ));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// A platform's user id as reef keeps it: a positive number (Telegram ids, Discord
/// snowflakes).
pub(crate) fn valid_numeric_id(text: &str) -> bool {
    text.parse::<u64>().is_ok_and(|id| id > 0)
}
