//! `[channels.NAME] type = "telegram"`: a Telegram bot over the Bot API. The token is read by
//! reference (`token_env` or `token_secret`); updates come by long polling or, with
//! `mode = "webhook"`, to the daemon at `POST /hooks/telegram/NAME`.

use crate::channels::ChannelToml;
use crate::error::ConfigError;
use reef_core::SecretSpec;

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
    let token = crate::bot::credential(
        table.token_env.as_ref(),
        table.token_secret.as_ref(),
        "token",
        "the bot token",
        key,
        secrets,
        invalid,
    )?;
    let api_url = crate::bot::base_url(
        table.api_url.as_ref(),
        "https://api.telegram.org",
        "api_url",
        key,
        invalid,
    )?;
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
