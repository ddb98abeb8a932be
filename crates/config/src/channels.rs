//! `[channels.NAME]` and `[operators]`: the doors agents are reached through (IRC first) and,
//! per channel, who may run operator commands on it.

use crate::error::ConfigError;
use reef_core::SecretSpec;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelToml {
    /// Which channel this is (`irc`); the table's own name is free.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub enabled: Option<bool>,
    pub server: Option<String>,
    pub tls: Option<bool>,
    pub nick: Option<String>,
    pub control: Option<String>,
    pub room: Option<String>,
    /// A `[secrets]` name: the password for SASL PLAIN.
    pub sasl_secret: Option<String>,
    /// A `[secrets]` name: the password sent to NickServ after connecting.
    pub nickserv_secret: Option<String>,
    pub flood_burst: Option<u32>,
    pub flood_interval_ms: Option<u64>,
    /// Where a conversation no agent is named in goes: `agent:NAME` or `spawn:TEMPLATE`.
    pub route: Option<String>,
    /// Seconds during which one agent's message to another is not delivered again.
    pub agent_cooldown_secs: Option<u64>,
    /// Telegram, Discord: the environment variable holding the bot token.
    pub token_env: Option<String>,
    /// Telegram, Discord: the `[secrets]` (or vault) name of the bot token.
    pub token_secret: Option<String>,
    /// Telegram, Discord, Slack: the platform API's base URL.
    pub api_url: Option<String>,
    /// Telegram: `poll` or `webhook`; Slack: `socket` or `events`.
    pub mode: Option<String>,
    /// Discord: the gateway's WebSocket URL.
    pub gateway_url: Option<String>,
    /// Slack: the app-level token (Socket Mode), by environment variable or secret.
    pub app_token_env: Option<String>,
    pub app_token_secret: Option<String>,
    /// Slack: the bot token (Web API), by environment variable or secret.
    pub bot_token_env: Option<String>,
    pub bot_token_secret: Option<String>,
    /// Slack: the signing secret (Events API), by environment variable or secret.
    pub signing_secret_env: Option<String>,
    pub signing_secret_secret: Option<String>,
    /// Telegram webhook mode: the public https URL the platform posts updates to.
    pub webhook_url: Option<String>,
    /// Telegram: who may talk to the bot (user ids); empty, everyone.
    pub allowed_users: Option<Vec<i64>>,
    /// Telegram: the chat announcements go to.
    pub control_chat: Option<i64>,
    /// Telegram: how long one `getUpdates` long poll waits.
    pub poll_timeout_secs: Option<u32>,
}

/// One `[operators]` entry: an IRC mask, or a bot platform's user id as a number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum OperatorToml {
    Text(String),
    Id(i64),
}

impl OperatorToml {
    fn into_text(self) -> String {
        match self {
            OperatorToml::Text(text) => text,
            OperatorToml::Id(id) => id.to_string(),
        }
    }
}

/// One configured channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelConfig {
    /// The table's name (`[channels.NAME]`).
    pub name: String,
    pub enabled: bool,
    pub kind: ChannelKind,
    /// `[operators] NAME = [...]`: identities allowed to run operator commands here (IRC
    /// `nick!user@host` masks).
    pub operators: Vec<String>,
    /// Where a conversation that names no agent goes (a direct message to the overseer
    /// that is not a command); `None` answers it with a hint.
    pub route: Option<Route>,
    /// After one agent's message reaches another, messages between the two are not
    /// delivered for this many seconds, so two agents cannot answer each other forever.
    pub agent_cooldown_secs: u64,
}

/// Where a conversation is routed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// One existing agent takes every such conversation.
    Agent(String),
    /// One agent per conversation, from this template, created on first contact and named
    /// after the conversation.
    Spawn(String),
}

/// The default agent-to-agent cooldown, in seconds.
pub const DEFAULT_AGENT_COOLDOWN_SECS: u64 = 10;

/// Which channel, with its own settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelKind {
    Irc(IrcConfig),
    Telegram(crate::telegram::TelegramConfig),
    Discord(crate::discord::DiscordConfig),
    Slack(crate::slack::SlackConfig),
}

impl ChannelKind {
    /// The `type` name.
    pub fn name(&self) -> &'static str {
        match self {
            ChannelKind::Irc(_) => "irc",
            ChannelKind::Telegram(_) => "telegram",
            ChannelKind::Discord(_) => "discord",
            ChannelKind::Slack(_) => "slack",
        }
    }
}

/// An IRC connection: the overseer's nick in `control`, agents as their own nicks in `room`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrcConfig {
    pub host: String,
    pub port: u16,
    pub tls: bool,
    pub nick: String,
    pub control: String,
    pub room: String,
    pub sasl_secret: Option<String>,
    pub nickserv_secret: Option<String>,
    /// Flood control: lines sent at once before the pace applies, and one line per
    /// `flood_interval_ms` after that.
    pub flood_burst: u32,
    pub flood_interval_ms: u64,
}

/// The channel types reef knows.
const KINDS: &[&str] = &["irc", "telegram", "discord", "slack"];

pub(crate) fn resolve(
    raw: BTreeMap<String, ChannelToml>,
    operators: BTreeMap<String, Vec<OperatorToml>>,
    secrets: &[SecretSpec],
    origin_of: &dyn Fn(&str) -> String,
) -> Result<BTreeMap<String, ChannelConfig>, ConfigError> {
    let invalid = |key: String, message: String| ConfigError::Invalid {
        origin: origin_of(&key),
        key,
        message,
    };
    let mut operators: BTreeMap<String, Vec<String>> = operators
        .into_iter()
        .map(|(name, ids)| (name, ids.into_iter().map(OperatorToml::into_text).collect()))
        .collect();
    if let Some(name) = operators.keys().find(|n| !raw.contains_key(*n)) {
        return Err(invalid(
            format!("operators.{name}"),
            format!("names channel `{name}`, but no [channels.{name}] is defined"),
        ));
    }
    let mut channels = BTreeMap::new();
    for (name, table) in raw {
        let key = |field: &str| format!("channels.{name}.{field}");
        let kind = table.kind.as_deref().ok_or_else(|| {
            invalid(
                key("type"),
                format!("missing; expected one of: {}", KINDS.join(", ")),
            )
        })?;
        let kind = match kind {
            "irc" => {
                refuse_foreign(&table, "irc", &key, &invalid)?;
                ChannelKind::Irc(resolve_irc(&table, &key, secrets, &invalid)?)
            }
            "telegram" => {
                refuse_foreign(&table, "telegram", &key, &invalid)?;
                ChannelKind::Telegram(crate::telegram::resolve(&table, &key, secrets, &invalid)?)
            }
            "discord" => {
                refuse_foreign(&table, "discord", &key, &invalid)?;
                ChannelKind::Discord(crate::discord::resolve(&table, &key, secrets, &invalid)?)
            }
            "slack" => {
                refuse_foreign(&table, "slack", &key, &invalid)?;
                ChannelKind::Slack(crate::slack::resolve(&table, &key, secrets, &invalid)?)
            }
            other => {
                return Err(invalid(
                    key("type"),
                    format!(
                        "unknown channel type `{other}` (expected one of: {})",
                        KINDS.join(", ")
                    ),
                ));
            }
        };
        let operators = operators.remove(&name).unwrap_or_default();
        let (fits, expected): (fn(&str) -> bool, &str) = match &kind {
            ChannelKind::Irc(_) => (valid_mask, "a nick!user@host mask (like alice!*@*)"),
            ChannelKind::Telegram(_) => (
                crate::telegram::valid_user_id,
                "a Telegram user id (a number, like 123456789)",
            ),
            ChannelKind::Discord(_) => (
                crate::bot::valid_numeric_id,
                "a Discord user id (a number, like 80351110224678912)",
            ),
            ChannelKind::Slack(_) => (
                crate::slack::valid_user_id,
                "a Slack user id (like \"U012AB3CD\")",
            ),
        };
        if let Some(bad) = operators.iter().find(|m| !fits(m)) {
            return Err(invalid(
                format!("operators.{name}"),
                format!("`{bad}` is not {expected}"),
            ));
        }
        let route = table
            .route
            .as_deref()
            .map(|r| parse_route(r).map_err(|m| invalid(key("route"), m)))
            .transpose()?;
        let agent_cooldown_secs = table
            .agent_cooldown_secs
            .unwrap_or(DEFAULT_AGENT_COOLDOWN_SECS);
        if agent_cooldown_secs > 86_400 {
            return Err(invalid(
                key("agent_cooldown_secs"),
                format!("{agent_cooldown_secs} is more than a day (86400)"),
            ));
        }
        channels.insert(
            name.clone(),
            ChannelConfig {
                name,
                enabled: table.enabled.unwrap_or(true),
                kind,
                operators,
                route,
                agent_cooldown_secs,
            },
        );
    }
    Ok(channels)
}

/// Refuses a key that belongs to another channel type than `kind`.
fn refuse_foreign(
    t: &ChannelToml,
    kind: &str,
    key: &dyn Fn(&str) -> String,
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<(), ConfigError> {
    // (key, the types it belongs to, whether the table sets it)
    const TG: &[&str] = &["telegram"];
    const BOTS: &[&str] = &["telegram", "discord"];
    const SLACK: &[&str] = &["slack"];
    let keys: &[(&str, &[&str], bool)] = &[
        ("server", &["irc"], t.server.is_some()),
        ("tls", &["irc"], t.tls.is_some()),
        ("nick", &["irc"], t.nick.is_some()),
        ("control", &["irc"], t.control.is_some()),
        ("room", &["irc"], t.room.is_some()),
        ("sasl_secret", &["irc"], t.sasl_secret.is_some()),
        ("nickserv_secret", &["irc"], t.nickserv_secret.is_some()),
        ("flood_burst", &["irc"], t.flood_burst.is_some()),
        ("flood_interval_ms", &["irc"], t.flood_interval_ms.is_some()),
        ("token_env", BOTS, t.token_env.is_some()),
        ("token_secret", BOTS, t.token_secret.is_some()),
        (
            "api_url",
            &["telegram", "discord", "slack"],
            t.api_url.is_some(),
        ),
        ("mode", &["telegram", "slack"], t.mode.is_some()),
        ("webhook_url", TG, t.webhook_url.is_some()),
        ("allowed_users", TG, t.allowed_users.is_some()),
        ("control_chat", TG, t.control_chat.is_some()),
        ("poll_timeout_secs", TG, t.poll_timeout_secs.is_some()),
        ("gateway_url", &["discord"], t.gateway_url.is_some()),
        ("app_token_env", SLACK, t.app_token_env.is_some()),
        ("app_token_secret", SLACK, t.app_token_secret.is_some()),
        ("bot_token_env", SLACK, t.bot_token_env.is_some()),
        ("bot_token_secret", SLACK, t.bot_token_secret.is_some()),
        ("signing_secret_env", SLACK, t.signing_secret_env.is_some()),
        (
            "signing_secret_secret",
            SLACK,
            t.signing_secret_secret.is_some(),
        ),
    ];
    match keys
        .iter()
        .find(|(_, owners, set)| *set && !owners.contains(&kind))
    {
        Some((field, owners, _)) => Err(invalid(
            key(field),
            format!(
                "is a key of {} channels, not of {kind} ones",
                owners.join(" and ")
            ),
        )),
        None => Ok(()),
    }
}

/// `agent:NAME` or `spawn:TEMPLATE`, each name plain (a-z, 0-9, - and _).
fn parse_route(text: &str) -> Result<Route, String> {
    let plain = |name: &str| {
        !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    };
    match text.split_once(':') {
        Some(("agent", name)) if plain(name) => Ok(Route::Agent(name.to_owned())),
        Some(("spawn", template)) if plain(template) => Ok(Route::Spawn(template.to_owned())),
        _ => Err(format!(
            "`{text}` is not a route; use \"agent:NAME\" or \"spawn:TEMPLATE\""
        )),
    }
}

fn resolve_irc(
    table: &ChannelToml,
    key: &dyn Fn(&str) -> String,
    secrets: &[SecretSpec],
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<IrcConfig, ConfigError> {
    let tls = table.tls.unwrap_or(false);
    let server = table
        .server
        .as_deref()
        .ok_or_else(|| invalid(key("server"), "missing; e.g. \"127.0.0.1:6667\"".into()))?;
    // The IANA ports: 6697 for IRC over TLS, 6667 in the clear.
    let default_port = if tls { 6697 } else { 6667 };
    let bad_port = |port: &str| {
        invalid(
            key("server"),
            format!("`{port}` is not a port (1 to 65535) in {server:?}"),
        )
    };
    let parse_port = |port: &str| port.parse::<u16>().ok().filter(|p| *p > 0);
    // `[v6]`, `[v6]:port`, `host` or `host:port`; a bare IPv6 address needs its brackets.
    let (host, port) = if let Some(bracketed) = server.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| invalid(key("server"), format!("{server:?} opens `[` without `]`")))?;
        match after.strip_prefix(':') {
            None if after.is_empty() => (host, default_port),
            Some(port) => (host, parse_port(port).ok_or_else(|| bad_port(port))?),
            None => {
                return Err(invalid(
                    key("server"),
                    format!("{server:?} is not host:port"),
                ));
            }
        }
    } else {
        match server.split_once(':') {
            Some((host, port)) if !port.contains(':') => {
                (host, parse_port(port).ok_or_else(|| bad_port(port))?)
            }
            Some(_) => {
                return Err(invalid(
                    key("server"),
                    format!("{server:?}: write an IPv6 address in brackets, e.g. \"[::1]:6667\""),
                ));
            }
            None => (server, default_port),
        }
    };
    if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err(invalid(key("server"), format!("{server:?} names no host")));
    }
    let nick = table.nick.clone().unwrap_or_else(|| "overseer".into());
    if !valid_nick(&nick) {
        return Err(invalid(
            key("nick"),
            format!(
                "`{nick}` is not an IRC nick (1 to 30 letters, digits, hyphens or any of \
                 [ ] \\ ^ _ ` {{ | }}, not starting with a digit or a hyphen)"
            ),
        ));
    }
    let room_of = |field: &str, value: &Option<String>, default: &str| {
        let room = value.clone().unwrap_or_else(|| default.into());
        if valid_channel(&room) {
            Ok(room)
        } else {
            Err(invalid(
                key(field),
                format!(
                    "`{room}` is not an IRC channel (`#` or `&` and up to 49 more characters, \
                     no space, comma, colon or control character)"
                ),
            ))
        }
    };
    let control = room_of("control", &table.control, "#control")?;
    let room = room_of("room", &table.room, "#agents")?;
    for (field, secret) in [
        ("sasl_secret", &table.sasl_secret),
        ("nickserv_secret", &table.nickserv_secret),
    ] {
        if let Some(name) = secret
            && !secrets.iter().any(|s| &s.name == name)
        {
            return Err(invalid(
                key(field),
                format!("names secret `{name}`, but no [secrets.{name}] is defined"),
            ));
        }
    }
    // RFC 1459's rule of thumb: a burst of 5 lines, then one every 2 seconds.
    let flood_burst = table.flood_burst.unwrap_or(5);
    if flood_burst == 0 {
        return Err(invalid(key("flood_burst"), "must be at least 1".into()));
    }
    let flood_interval_ms = table.flood_interval_ms.unwrap_or(2000);
    if !(100..=60_000).contains(&flood_interval_ms) {
        return Err(invalid(
            key("flood_interval_ms"),
            "must be between 100 and 60000".into(),
        ));
    }
    Ok(IrcConfig {
        host: host.to_owned(),
        port,
        tls,
        nick,
        control,
        room,
        sasl_secret: table.sasl_secret.clone(),
        nickserv_secret: table.nickserv_secret.clone(),
        flood_burst,
        flood_interval_ms,
    })
}

/// An IRC nick: a letter or one of `[]\^_`{|}` first, then those, digits and `-`; at most 30.
pub fn valid_nick(nick: &str) -> bool {
    let special = |c: char| "[]\\^_`{|}".contains(c);
    let mut chars = nick.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || special(c))
        && chars.all(|c| c.is_ascii_alphanumeric() || special(c) || c == '-')
        && nick.len() <= 30
}

/// An IRC channel name: `#` or `&`, then up to 49 characters with no space, comma, colon
/// (RFC 2812 and ngircd refuse it), BEL or other control character.
fn valid_channel(name: &str) -> bool {
    (name.starts_with('#') || name.starts_with('&'))
        && (2..=50).contains(&name.len())
        && !name
            .chars()
            .any(|c| c == ' ' || c == ',' || c == ':' || c.is_control())
}

/// A `nick!user@host` mask: three non-empty parts of printable ASCII. The host part is what
/// identifies a user on a server without services (anyone may take a free nick), so
/// `alice!*@*` trusts whoever holds the nick `alice`.
fn valid_mask(mask: &str) -> bool {
    if !mask.chars().all(|c| c.is_ascii_graphic()) {
        return false;
    }
    let Some((nick, rest)) = mask.split_once('!') else {
        return false;
    };
    let Some((user, host)) = rest.split_once('@') else {
        return false;
    };
    [nick, user, host]
        .iter()
        .all(|p| !p.is_empty() && !p.contains(char::is_whitespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nicks_channels_and_masks() {
        for nick in ["overseer", "ada", "a[bot]", "x-1", "_x"] {
            assert!(valid_nick(nick), "{nick}");
        }
        for nick in ["", "1ada", "-ada", "a b", "a.b", &"x".repeat(31)] {
            assert!(!valid_nick(nick), "{nick}");
        }
        assert!(valid_channel("#agents") && valid_channel("&local"));
        for name in ["agents", "#", "#a b", "#a,b", "#a\x07", "#a:b"] {
            assert!(!valid_channel(name), "{name:?}");
        }
        assert!(valid_mask("alice!*@*") && valid_mask("*!*@*.example.org"));
        for mask in [
            "alice",
            "alice!*",
            "!x@y",
            "a!b@",
            "a !b@c",
            "a!b@c\x01",
            "ä!b@c",
        ] {
            assert!(!valid_mask(mask), "{mask}");
        }
    }
}
