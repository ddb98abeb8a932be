//! `[channels.NAME]` and `[operators]`: defaults, and errors that name the key.

use crate::{Fixture, MAIN};
use reef_config::{ChannelKind, IrcConfig, Route, SlackMode, TelegramMode};
use reef_core::SecretSource;
use std::path::Path;

fn load(extra: &str) -> Result<reef_config::Config, String> {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), &format!("{MAIN}\n{extra}"));
    fx.load(&[], &[]).map_err(|e| e.to_string())
}

#[test]
fn an_irc_channel_takes_its_defaults() {
    let config = load(
        "[channels.irc]\ntype = \"irc\"\nserver = \"127.0.0.1\"\n\n\
         [operators]\nirc = [\"alice!*@*\"]\n",
    )
    .unwrap();
    let irc = &config.channels["irc"];
    assert!(irc.enabled);
    assert_eq!(irc.operators, ["alice!*@*"]);
    assert_eq!(
        irc.kind,
        ChannelKind::Irc(IrcConfig {
            host: "127.0.0.1".into(),
            port: 6667,
            tls: false,
            nick: "overseer".into(),
            control: "#control".into(),
            room: "#agents".into(),
            sasl_secret: None,
            nickserv_secret: None,
            flood_burst: 5,
            flood_interval_ms: 2000,
        })
    );
    let tls =
        load("[channels.x]\ntype = \"irc\"\nserver = \"irc.example.org\"\ntls = true\n").unwrap();
    let ChannelKind::Irc(irc) = &tls.channels["x"].kind else {
        panic!("an IRC channel")
    };
    assert_eq!(irc.port, 6697, "IRC over TLS has its own port");
    for (server, host, port) in [
        ("[::1]:7000", "::1", 7000),
        ("[::1]", "::1", 6667),
        ("irc.example.org:6697", "irc.example.org", 6697),
    ] {
        let config = load(&format!(
            "[channels.x]\ntype = \"irc\"\nserver = \"{server}\"\n"
        ))
        .unwrap();
        let ChannelKind::Irc(irc) = &config.channels["x"].kind else {
            panic!("an IRC channel")
        };
        assert_eq!((irc.host.as_str(), irc.port), (host, port), "{server}");
    }
    assert!(load("").unwrap().channels.is_empty());
}

#[test]
fn bad_channel_settings_name_the_key() {
    let cases = [
        (
            "[channels.irc]\nserver = \"h:1\"\n",
            "channels.irc.type",
            "missing",
        ),
        (
            "[channels.irc]\ntype = \"telegraph\"\n",
            "channels.irc.type",
            "unknown channel type `telegraph`",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\n",
            "channels.irc.server",
            "missing",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"h:99999\"\n",
            "channels.irc.server",
            "not a port",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \":6667\"\n",
            "channels.irc.server",
            "names no host",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"2001:db8::1\"\n",
            "channels.irc.server",
            "IPv6 address in brackets",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"[::1\"\n",
            "channels.irc.server",
            "without `]`",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"h\"\ncontrol = \"#a:b\"\n",
            "channels.irc.control",
            "not an IRC channel",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"h\"\nnickserv_secret = \"ns\"\n",
            "channels.irc.nickserv_secret",
            "no [secrets.ns] is defined",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"h\"\nnick = \"9lives\"\n",
            "channels.irc.nick",
            "not an IRC nick",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"h\"\nroom = \"agents\"\n",
            "channels.irc.room",
            "not an IRC channel",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"h\"\nsasl_secret = \"pw\"\n",
            "channels.irc.sasl_secret",
            "no [secrets.pw] is defined",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"h\"\nflood_burst = 0\n",
            "channels.irc.flood_burst",
            "at least 1",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"h\"\nflood_interval_ms = 5\n",
            "channels.irc.flood_interval_ms",
            "between 100 and 60000",
        ),
        (
            "[operators]\nirc = [\"alice!*@*\"]\n",
            "operators.irc",
            "no [channels.irc] is defined",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"h\"\n[operators]\nirc = [\"alice\"]\n",
            "operators.irc",
            "not a nick!user@host mask",
        ),
        (
            "[channels.irc]\ntype = \"irc\"\nserver = \"h\"\nport = 1\n",
            "channels.irc",
            "unknown field `port`",
        ),
    ];
    for (toml, key, message) in cases {
        let err = load(toml).unwrap_err();
        assert!(err.contains(key) && err.contains(message), "{toml}\n{err}");
    }
}

#[test]
fn a_channel_routes_to_an_agent_or_a_template_and_cools_agents_down() {
    let base = "[channels.irc]\ntype = \"irc\"\nserver = \"127.0.0.1\"\n";
    let config = load(base).unwrap();
    let irc = &config.channels["irc"];
    assert_eq!(irc.route, None);
    assert_eq!(
        irc.agent_cooldown_secs,
        reef_config::DEFAULT_AGENT_COOLDOWN_SECS
    );
    let config = load(&format!(
        "{base}route = \"agent:ada\"\nagent_cooldown_secs = 0\n"
    ))
    .unwrap();
    assert_eq!(
        config.channels["irc"].route,
        Some(Route::Agent("ada".into()))
    );
    assert_eq!(config.channels["irc"].agent_cooldown_secs, 0);
    let config = load(&format!("{base}route = \"spawn:worker\"\n")).unwrap();
    assert_eq!(
        config.channels["irc"].route,
        Some(Route::Spawn("worker".into()))
    );
    for (extra, message) in [
        ("route = \"ada\"", "is not a route"),
        ("route = \"agent:\"", "is not a route"),
        ("route = \"spawn:Bad Name\"", "is not a route"),
        ("agent_cooldown_secs = 100000", "more than a day"),
    ] {
        let err = load(&format!("{base}{extra}\n")).unwrap_err();
        assert!(err.contains("channels.irc."), "{extra}: {err}");
        assert!(err.contains(message), "{extra}: {err}");
    }
}

#[test]
fn a_telegram_channel_reads_its_token_by_reference() {
    let config = load(
        "[channels.tg]\ntype = \"telegram\"\ntoken_env = \"TG_BOT\"\nallowed_users = [7, 8]\n\
         control_chat = -100123\nroute = \"spawn:worker\"\n\n[operators]\ntg = [42]\n",
    )
    .unwrap();
    let tg = &config.channels["tg"];
    assert_eq!(tg.operators, ["42"]);
    let ChannelKind::Telegram(t) = &tg.kind else {
        panic!("a Telegram channel")
    };
    assert_eq!(t.token.source, SecretSource::Env("TG_BOT".into()));
    assert_eq!(t.api_url, "https://api.telegram.org");
    assert_eq!(t.mode, TelegramMode::Poll);
    assert_eq!(t.allowed_users, [7, 8]);
    assert_eq!(t.control_chat, Some(-100_123));
    assert_eq!(t.poll_timeout_secs, 30);
    let hooked = load(
        "[channels.tg]\ntype = \"telegram\"\ntoken_env = \"TG_BOT\"\nmode = \"webhook\"\n\
         webhook_url = \"https://reef.example.com/hooks/telegram/tg\"\napi_url = \"http://127.0.0.1:8081/\"\n",
    )
    .unwrap();
    let ChannelKind::Telegram(t) = &hooked.channels["tg"].kind else {
        panic!("a Telegram channel")
    };
    assert_eq!(t.api_url, "http://127.0.0.1:8081");
    assert_eq!(
        t.mode,
        TelegramMode::Webhook {
            url: "https://reef.example.com/hooks/telegram/tg".into()
        }
    );
}

#[test]
fn bad_telegram_settings_name_the_key() {
    let tg = "[channels.tg]\ntype = \"telegram\"\n";
    for (extra, key, says) in [
        ("", "channels.tg.token_env", "missing"),
        (
            "token_env = \"A\"\ntoken_secret = \"B\"\n",
            "channels.tg.token_secret",
            "not both",
        ),
        (
            "token_secret = \"NOPE\"\n",
            "channels.tg.token_secret",
            "no [secrets.NOPE]",
        ),
        (
            "token_env = \"A\"\nmode = \"push\"\n",
            "channels.tg.mode",
            "unknown mode",
        ),
        (
            "token_env = \"A\"\nmode = \"webhook\"\n",
            "channels.tg.webhook_url",
            "missing",
        ),
        (
            "token_env = \"A\"\nwebhook_url = \"https://x/hooks/telegram/tg\"\n",
            "channels.tg.webhook_url",
            "webhook",
        ),
        (
            "token_env = \"A\"\napi_url = \"ftp://x\"\n",
            "channels.tg.api_url",
            "http",
        ),
        (
            "token_env = \"A\"\npoll_timeout_secs = 90\n",
            "channels.tg.poll_timeout_secs",
            "between",
        ),
        (
            "token_env = \"A\"\nserver = \"irc:6667\"\n",
            "channels.tg.server",
            "irc channels",
        ),
        (
            "token_env = \"A\"\n\n[operators]\ntg = [\"alice!*@*\"]\n",
            "operators.tg",
            "Telegram user id",
        ),
    ] {
        let err = load(&format!("{tg}{extra}")).unwrap_err();
        assert!(err.contains(key) && err.contains(says), "{extra}\n{err}");
    }
    let err =
        load("[channels.irc]\ntype = \"irc\"\nserver = \"h\"\ntoken_env = \"A\"\n").unwrap_err();
    assert!(
        err.contains("channels.irc.token_env") && err.contains("telegram and discord channels"),
        "{err}"
    );
}

#[test]
fn a_discord_bot_takes_its_defaults_and_bad_settings_name_the_key() {
    let config = load(
        "[channels.dc]\ntype = \"discord\"\ntoken_env = \"DISCORD_TOKEN\"\n\n\
         [operators]\ndc = [80351110224678912]\n",
    )
    .unwrap();
    let ChannelKind::Discord(dc) = &config.channels["dc"].kind else {
        panic!("a Discord channel")
    };
    assert_eq!(dc.api_url, "https://discord.com/api/v10");
    assert_eq!(dc.gateway_url, None);
    assert_eq!(dc.token.source, SecretSource::Env("DISCORD_TOKEN".into()));
    assert_eq!(config.channels["dc"].operators, ["80351110224678912"]);
    let dc = "[channels.dc]\ntype = \"discord\"\n";
    for (extra, key, says) in [
        ("", "channels.dc.token_env", "missing"),
        (
            "token_env = \"A\"\ngateway_url = \"https://gateway.discord.gg\"\n",
            "channels.dc.gateway_url",
            "WebSocket",
        ),
        (
            "token_env = \"A\"\napi_url = \"discord.com\"\n",
            "channels.dc.api_url",
            "http",
        ),
        (
            "token_env = \"A\"\nmode = \"poll\"\n",
            "channels.dc.mode",
            "telegram and slack channels",
        ),
        (
            "token_env = \"A\"\n\n[operators]\ndc = [\"alice\"]\n",
            "operators.dc",
            "Discord user id",
        ),
    ] {
        let err = load(&format!("{dc}{extra}")).unwrap_err();
        assert!(err.contains(key) && err.contains(says), "{extra}\n{err}");
    }
}

#[test]
fn a_slack_app_takes_its_defaults_and_bad_settings_name_the_key() {
    let config = load(
        "[channels.sl]\ntype = \"slack\"\napp_token_env = \"SLACK_APP_TOKEN\"\n\
         bot_token_env = \"SLACK_BOT_TOKEN\"\n\n[operators]\nsl = [\"U012AB3CD\"]\n",
    )
    .unwrap();
    let ChannelKind::Slack(sl) = &config.channels["sl"].kind else {
        panic!("a Slack channel")
    };
    assert_eq!(sl.api_url, "https://slack.com/api");
    assert_eq!(
        sl.bot_token.source,
        SecretSource::Env("SLACK_BOT_TOKEN".into())
    );
    let SlackMode::Socket { app_token } = &sl.mode else {
        panic!("Socket Mode by default")
    };
    assert_eq!(
        app_token.source,
        SecretSource::Env("SLACK_APP_TOKEN".into())
    );
    let events = load(
        "[channels.sl]\ntype = \"slack\"\nmode = \"events\"\nbot_token_env = \"B\"\n\
         signing_secret_env = \"SLACK_SIGNING_SECRET\"\n",
    )
    .unwrap();
    let ChannelKind::Slack(sl) = &events.channels["sl"].kind else {
        panic!("a Slack channel")
    };
    assert!(matches!(&sl.mode, SlackMode::Events { signing_secret }
        if signing_secret.source == SecretSource::Env("SLACK_SIGNING_SECRET".into())));
    let sl = "[channels.sl]\ntype = \"slack\"\n";
    for (extra, key, says) in [
        (
            "app_token_env = \"A\"\n",
            "channels.sl.bot_token_env",
            "missing",
        ),
        (
            "bot_token_env = \"B\"\n",
            "channels.sl.app_token_env",
            "missing",
        ),
        (
            "bot_token_env = \"B\"\nmode = \"events\"\n",
            "channels.sl.signing_secret_env",
            "missing",
        ),
        (
            "bot_token_env = \"B\"\napp_token_env = \"A\"\nmode = \"events\"\n\
             signing_secret_env = \"S\"\n",
            "channels.sl.app_token_env",
            "socket",
        ),
        (
            "bot_token_env = \"B\"\napp_token_env = \"A\"\nmode = \"rtm\"\n",
            "channels.sl.mode",
            "unknown mode",
        ),
        (
            "bot_token_env = \"B\"\napp_token_env = \"A\"\ntoken_env = \"T\"\n",
            "channels.sl.token_env",
            "telegram and discord channels",
        ),
        (
            "bot_token_env = \"B\"\napp_token_env = \"A\"\n\n[operators]\nsl = [\"alice\"]\n",
            "operators.sl",
            "Slack user id",
        ),
    ] {
        let err = load(&format!("{sl}{extra}")).unwrap_err();
        assert!(err.contains(key) && err.contains(says), "{extra}\n{err}");
    }
}
