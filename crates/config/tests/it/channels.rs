//! `[channels.NAME]` and `[operators]`: defaults, and errors that name the key.

use crate::{Fixture, MAIN};
use reef_config::{ChannelKind, IrcConfig, Route};
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
    let ChannelKind::Irc(irc) = &tls.channels["x"].kind;
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
        let ChannelKind::Irc(irc) = &config.channels["x"].kind;
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
