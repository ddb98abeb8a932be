//! reef-gateway: the front doors at run time. Every channel in `[channels.NAME]` runs under
//! a supervisor that reconnects it with backoff and reports its state on the runtime's
//! board; while connected, what people write reaches the overseer (operator commands, for
//! operators only) or the agent it names, answers go back where the question came from,
//! agents appear on the channel as they run, and stops and questions are announced.
//!
//! The data path: channel → [`door`] (routing, cooldown) → the agent's inbox → turn →
//! `turn.ended` in the history → [`door`] → channel.

mod address;
mod announce;
mod cooldown;
mod door;
mod supervise;

pub use address::{Origin, conversation_agent, mentions};
pub use door::Layout;

use reef_channels::discord::DiscordChannel;
use reef_channels::irc::{Credentials, IrcChannel};
use reef_channels::slack::{SlackChannel, SlackSource};
use reef_channels::telegram::TelegramChannel;
use reef_config::{ChannelConfig, ChannelKind, SlackMode, TelegramMode, read_secret};
use reef_core::Channel;
use reef_runtime::{ChannelHook, ChannelState, ChannelStatus, HookKind, Runtime};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The running channels.
pub struct Gateway {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// Why a channel could not be set up at all (not retried: the configuration must change).
#[derive(Debug, thiserror::Error)]
#[error("channel `{channel}`: {message}")]
pub struct GatewayError {
    pub channel: String,
    pub message: String,
}

impl Gateway {
    /// Starts every enabled channel of the runtime's configuration; disabled ones are on
    /// the board as such, and one that cannot be set up is on it as down with the reason.
    pub async fn start(rt: &Runtime) -> Gateway {
        let (stop, _) = watch::channel(false);
        let mut tasks = Vec::new();
        for config in rt.config().channels.values() {
            let kind = config.kind.name();
            let target = match &config.kind {
                ChannelKind::Irc(irc) => format!("{}:{}", irc.host, irc.port),
                ChannelKind::Telegram(tg) => tg.api_url.clone(),
                ChannelKind::Discord(dc) => dc.api_url.clone(),
                ChannelKind::Slack(sl) => sl.api_url.clone(),
            };
            let status = |state, error: Option<String>| ChannelStatus {
                name: config.name.clone(),
                kind: kind.to_owned(),
                target: target.clone(),
                state,
                since_unix: reef_store::unix_now(),
                error,
                failures: 0,
                next_attempt_unix: None,
                connected: 0,
                queued: 0,
                reconnects: 0,
                messages_in: 0,
                messages_out: 0,
            };
            if !config.enabled {
                rt.report_channel(status(ChannelState::Disabled, None))
                    .await;
                continue;
            }
            let (channel, layout) = match build(rt, config) {
                Ok(built) => built,
                // A channel that cannot be set up (its token is not in the environment) is
                // down with the reason; the daemon and the other channels run on.
                Err(err) => {
                    tracing::error!(channel = %config.name, error = %err, "channel not started");
                    rt.report_channel(status(ChannelState::Down, Some(err.message)))
                        .await;
                    continue;
                }
            };
            let what = supervise::Supervised {
                layout,
                kind,
                target: target.clone(),
            };
            tasks.push(tokio::spawn(supervise::supervise(
                rt.clone(),
                channel,
                what,
                stop.subscribe(),
            )));
        }
        Gateway { stop, tasks }
    }

    /// Closes every channel (agents and the overseer say QUIT) and waits for them.
    pub async fn shutdown(self) {
        if self.stop.send(true).is_err() {
            tracing::debug!("every channel task had ended already");
        }
        for task in self.tasks {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "a channel task ended abnormally");
            }
        }
    }
}

fn build(rt: &Runtime, config: &ChannelConfig) -> Result<(Box<dyn Channel>, Layout), GatewayError> {
    let fail = |message: String| GatewayError {
        channel: config.name.clone(),
        message,
    };
    let secret = |name: &Option<String>| -> Result<Option<String>, GatewayError> {
        let Some(name) = name else {
            return Ok(None);
        };
        let spec = rt
            .config()
            .secrets
            .iter()
            .find(|s| &s.name == name)
            .ok_or_else(|| fail(format!("no [secrets.{name}]")))?;
        read_secret(spec, Some(&rt.config().vault))
            .map(|s| Some(s.expose().to_owned()))
            .map_err(fail)
    };
    match &config.kind {
        ChannelKind::Irc(irc) => {
            let credentials = Credentials {
                sasl_password: secret(&irc.sasl_secret)?,
                nickserv_password: secret(&irc.nickserv_secret)?,
            };
            if !irc.tls
                && (credentials.sasl_password.is_some() || credentials.nickserv_password.is_some())
            {
                tracing::warn!(channel = %config.name, "a password goes to the IRC server without TLS; set tls = true");
            }
            let channel = IrcChannel::new(irc.clone(), config.operators.clone(), credentials, None)
                .map_err(|e| fail(e.to_string()))?;
            let layout = Layout {
                name: config.name.clone(),
                control: irc.control.clone(),
                room: irc.room.clone(),
                route: config.route.clone(),
                cooldown: Duration::from_secs(config.agent_cooldown_secs),
            };
            Ok((Box::new(channel), layout))
        }
        ChannelKind::Telegram(tg) => {
            let token = read_secret(&tg.token, Some(&rt.config().vault)).map_err(fail)?;
            // No overall timeout: a long poll sets its own per request.
            let http = reef_llm::http_client(None).map_err(|e| fail(e.to_string()))?;
            let webhook = match &tg.mode {
                TelegramMode::Poll => None,
                TelegramMode::Webhook { .. } => {
                    let (feed, deliveries) = tokio::sync::mpsc::channel(16);
                    let secret = reef_security::api_token::random_hex(24);
                    rt.set_channel_hook(
                        &config.name,
                        ChannelHook {
                            kind: HookKind::Telegram,
                            secret: secret.clone(),
                            feed,
                        },
                    );
                    Some((secret, deliveries))
                }
            };
            let channel = TelegramChannel::new(
                http,
                tg.clone(),
                token.expose(),
                config.operators.clone(),
                webhook,
            )
            .map_err(|e| fail(e.to_string()))?;
            let layout = Layout {
                name: config.name.clone(),
                // Announcements go to the control chat, when there is one.
                control: tg.control_chat.map(|c| c.to_string()).unwrap_or_default(),
                room: String::new(),
                route: config.route.clone(),
                cooldown: Duration::from_secs(config.agent_cooldown_secs),
            };
            Ok((Box::new(channel), layout))
        }
        ChannelKind::Discord(dc) => {
            let token = read_secret(&dc.token, Some(&rt.config().vault)).map_err(fail)?;
            let http = reef_llm::http_client(None).map_err(|e| fail(e.to_string()))?;
            let channel =
                DiscordChannel::new(http, dc.clone(), token.expose(), config.operators.clone());
            Ok((Box::new(channel), bot_layout(config)))
        }
        ChannelKind::Slack(sl) => {
            let vault = Some(rt.config().vault.as_ref());
            let bot_token = read_secret(&sl.bot_token, vault).map_err(fail)?;
            let http = reef_llm::http_client(None).map_err(|e| fail(e.to_string()))?;
            let source = match &sl.mode {
                SlackMode::Socket { app_token } => SlackSource::Socket {
                    app_token: read_secret(app_token, vault)
                        .map_err(fail)?
                        .expose()
                        .to_owned(),
                },
                SlackMode::Events { signing_secret } => {
                    let secret = read_secret(signing_secret, vault).map_err(fail)?;
                    let (feed, deliveries) = tokio::sync::mpsc::channel(16);
                    rt.set_channel_hook(
                        &config.name,
                        ChannelHook {
                            kind: HookKind::Slack,
                            secret: secret.expose().to_owned(),
                            feed,
                        },
                    );
                    SlackSource::Events { feed: deliveries }
                }
            };
            let channel = SlackChannel::new(
                http,
                &sl.api_url,
                bot_token.expose(),
                config.operators.clone(),
                source,
            );
            Ok((Box::new(channel), bot_layout(config)))
        }
    }
}

/// Where a bot channel's conversations go; it has no rooms of reef's own.
fn bot_layout(config: &ChannelConfig) -> Layout {
    Layout {
        name: config.name.clone(),
        control: String::new(),
        room: String::new(),
        route: config.route.clone(),
        cooldown: Duration::from_secs(config.agent_cooldown_secs),
    }
}
