//! `[channels.NAME] type = "discord"`: a Discord bot. The token is read by reference
//! (`token_env` or `token_secret`); messages come over the gateway (a WebSocket), replies go
//! through the REST API.

use crate::channels::ChannelToml;
use crate::error::ConfigError;
use reef_core::SecretSpec;

/// A Discord bot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscordConfig {
    /// Where the bot token is read from.
    pub token: SecretSpec,
    /// The REST API's base URL with its version, without a trailing slash
    /// (`https://discord.com/api/v10`; a test's fake).
    pub api_url: String,
    /// The gateway's WebSocket URL; `None`: the one `GET /gateway/bot` names.
    pub gateway_url: Option<String>,
}

pub(crate) fn resolve(
    table: &ChannelToml,
    key: &dyn Fn(&str) -> String,
    secrets: &[SecretSpec],
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<DiscordConfig, ConfigError> {
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
        "https://discord.com/api/v10",
        "api_url",
        key,
        invalid,
    )?;
    let gateway_url = table
        .gateway_url
        .as_deref()
        .map(|url| crate::bot::websocket_url(url, "gateway_url", key, invalid))
        .transpose()?;
    Ok(DiscordConfig {
        token,
        api_url,
        gateway_url,
    })
}
