//! `[channels.NAME] type = "slack"`: a Slack app. Events arrive over Socket Mode (a
//! WebSocket opened with the app-level token) or, with `mode = "events"`, as the Events API's
//! signed posts to the daemon's `POST /hooks/slack/NAME`; replies go through the Web API with
//! the bot token. Every credential is read by reference.

use crate::channels::ChannelToml;
use crate::error::ConfigError;
use reef_core::SecretSpec;

/// A Slack app.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlackConfig {
    /// The bot token (`xoxb-…`), for the Web API.
    pub bot_token: SecretSpec,
    /// The Web API's base URL, without a trailing slash (`https://slack.com/api`).
    pub api_url: String,
    pub mode: SlackMode,
}

/// How events reach reef.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlackMode {
    /// Socket Mode: reef opens a WebSocket with the app-level token (`xapp-…`).
    Socket { app_token: SecretSpec },
    /// The Events API: Slack posts to the daemon, each request signed with the app's
    /// signing secret.
    Events { signing_secret: SecretSpec },
}

pub(crate) fn resolve(
    table: &ChannelToml,
    key: &dyn Fn(&str) -> String,
    secrets: &[SecretSpec],
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<SlackConfig, ConfigError> {
    let bot_token = crate::bot::credential(
        table.bot_token_env.as_ref(),
        table.bot_token_secret.as_ref(),
        "bot_token",
        "the bot token (xoxb-…)",
        key,
        secrets,
        invalid,
    )?;
    let api_url = crate::bot::base_url(
        table.api_url.as_ref(),
        "https://slack.com/api",
        "api_url",
        key,
        invalid,
    )?;
    let mode = match table.mode.as_deref().unwrap_or("socket") {
        "socket" => {
            if table.signing_secret_env.is_some() || table.signing_secret_secret.is_some() {
                return Err(invalid(
                    key("signing_secret_env"),
                    "is for mode = \"events\"".into(),
                ));
            }
            SlackMode::Socket {
                app_token: crate::bot::credential(
                    table.app_token_env.as_ref(),
                    table.app_token_secret.as_ref(),
                    "app_token",
                    "the app-level token (xapp-…) Socket Mode connects with",
                    key,
                    secrets,
                    invalid,
                )?,
            }
        }
        "events" => {
            if table.app_token_env.is_some() || table.app_token_secret.is_some() {
                return Err(invalid(
                    key("app_token_env"),
                    "is for mode = \"socket\"".into(),
                ));
            }
            SlackMode::Events {
                signing_secret: crate::bot::credential(
                    table.signing_secret_env.as_ref(),
                    table.signing_secret_secret.as_ref(),
                    "signing_secret",
                    "the app's signing secret",
                    key,
                    secrets,
                    invalid,
                )?,
            }
        }
        other => {
            return Err(invalid(
                key("mode"),
                format!("unknown mode `{other}` (expected socket or events)"),
            ));
        }
    };
    Ok(SlackConfig {
        bot_token,
        api_url,
        mode,
    })
}

/// A Slack user id: `U` or `W` and upper-case letters and digits (`U012AB3CD`).
pub(crate) fn valid_user_id(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some('U' | 'W'))
        && text.len() >= 3
        && text.len() <= 32
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}
