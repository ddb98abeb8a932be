//! `[channels.NAME] type = "telegram"`: a Telegram bot over the Bot API. The token is read by
//! reference (`token_env` or `token_secret`); updates come by long polling or, with
//! `mode = "webhook"`, to the daemon at `POST /hooks/telegram/NAME`.

use crate::channels::ChannelToml;
use crate::error::ConfigError;
use reef_core::{SecretPolicy, SecretSource, SecretSpec};

/// A Telegram bot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TelegramConfig {
    /// Where the bot token is read from (an environment variable, or a `[secrets]` entry).
    pub token: SecretSpec,
    /// The Bot API's base URL, without a trailing slash (`https://api.telegram.org`; a
    /// self-hosted Bot API server, or a test's fake).
    pub api_url: String,
    pub mode: TelegramMode,
    /// User ids who may talk to the bot; empty: everyone.
    pub allowed_users: Vec<i64>,
    /// The chat (usually a group of operators) where announcements are made; none: they are
    /// not sent.
    pub control_chat: Option<i64>,
    /// Seconds one `getUpdates` long poll waits for an update (1 to 50).
    pub poll_timeout_secs: u32,
}

/// How updates reach reef.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TelegramMode {
    /// `getUpdates` long polling.
    Poll,
    /// The platform posts updates to `url`, which reaches the daemon's
    /// `/hooks/telegram/NAME`.
    Webhook { url: String },
}

pub(crate) fn resolve(
    table: &ChannelToml,
    key: &dyn Fn(&str) -> String,
    secrets: &[SecretSpec],
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<TelegramConfig, ConfigError> {
    let token = match (&table.token_env, &table.token_secret) {
        (Some(var), None) => {
            if var.is_empty() || var.contains(['=', '\0']) {
                return Err(invalid(
                    key("token_env"),
                    format!("`{var}` is not an environment variable's name"),
                ));
            }
            SecretSpec {
                name: key("token"),
                source: SecretSource::Env(var.clone()),
                description: None,
                policy: SecretPolicy::default(),
            }
        }
        (None, Some(name)) => secrets
            .iter()
            .find(|s| &s.name == name)
            .cloned()
            .ok_or_else(|| {
                invalid(
                    key("token_secret"),
                    format!("names secret `{name}`, but no [secrets.{name}] is defined"),
                )
            })?,
        (Some(_), Some(_)) => {
            return Err(invalid(
                key("token_secret"),
                "give token_env or token_secret, not both".into(),
            ));
        }
        (None, None) => {
            return Err(invalid(
                key("token_env"),
                "missing: the environment variable holding the bot token (or token_secret)".into(),
            ));
        }
    };
    let api_url = table
        .api_url
        .clone()
        .unwrap_or_else(|| "https://api.telegram.org".into());
    if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
        return Err(invalid(
            key("api_url"),
            format!("`{api_url}` is not an http(s) URL"),
        ));
    }
    let api_url = api_url.trim_end_matches('/').to_owned();
    let mode = match (table.mode.as_deref().unwrap_or("poll"), &table.webhook_url) {
        ("poll", None) => TelegramMode::Poll,
        ("poll", Some(_)) => {
            return Err(invalid(
                key("webhook_url"),
                "is for mode = \"webhook\"".into(),
            ));
        }
        // api.telegram.org posts to https only; a self-hosted Bot API server also to http.
        ("webhook", Some(url)) if url.starts_with("https://") || url.starts_with("http://") => {
            TelegramMode::Webhook { url: url.clone() }
        }
        ("webhook", Some(url)) => {
            return Err(invalid(
                key("webhook_url"),
                format!("`{url}` is not an http(s) URL"),
            ));
        }
        ("webhook", None) => {
            return Err(invalid(
                key("webhook_url"),
                "missing: the public https URL that reaches this daemon's \
                 /hooks/telegram/NAME"
                    .into(),
            ));
        }
        (other, _) => {
            return Err(invalid(
                key("mode"),
                format!("unknown mode `{other}` (expected poll or webhook)"),
            ));
        }
    };
    let poll_timeout_secs = table.poll_timeout_secs.unwrap_or(30);
    if !(1..=50).contains(&poll_timeout_secs) {
        return Err(invalid(
            key("poll_timeout_secs"),
            "must be between 1 and 50".into(),
        ));
    }
    Ok(TelegramConfig {
        token,
        api_url,
        mode,
        allowed_users: table.allowed_users.clone().unwrap_or_default(),
        control_chat: table.control_chat,
        poll_timeout_secs,
    })
}

/// A Telegram user id: a positive number.
pub(crate) fn valid_user_id(text: &str) -> bool {
    text.parse::<i64>().is_ok_and(|id| id > 0)
}
