//! `[daemon]` keys of the API's hardening: `hosts`, `rate_limit`, `root_rate_limit` and
//! `[daemon.tls]`; defaults, `-c` overrides, and errors naming the key.

use crate::{Fixture, MAIN};
use reef_config::TlsSource;
use std::path::Path;

fn error_of(toml: &str) -> String {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), &format!("{MAIN}\n{toml}"));
    fx.load(&[], &[]).unwrap_err().to_string()
}

#[test]
fn defaults_limit_scoped_tokens_and_serve_plain_http() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    let config = fx.load(&[], &[]).unwrap();
    assert_eq!(config.daemon.rate_limit, Some(600));
    assert_eq!(config.daemon.root_rate_limit, None);
    assert!(config.daemon.hosts.is_empty());
    assert_eq!(config.daemon.tls, None);
}

#[test]
fn hosts_limits_and_tls_are_read_and_overridden() {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!(
            "{MAIN}\n[daemon]\nhosts = [\"Reef.Example.com\", \"10.0.0.5:7447\", \"[fd00::1]:7447\"]\n\
             rate_limit = 0\nroot_rate_limit = 120\n\n[daemon.tls]\ncert = \"tls/mine.pem\"\nkey = \"/etc/reef/key.pem\"\n"
        ),
    );
    let config = fx.load(&[], &[]).unwrap();
    assert_eq!(
        config.daemon.hosts,
        ["reef.example.com", "10.0.0.5:7447", "[fd00::1]:7447"]
    );
    assert_eq!(config.daemon.rate_limit, None, "0 is no limit");
    assert_eq!(config.daemon.root_rate_limit, Some(120));
    assert_eq!(
        config.daemon.tls,
        Some(TlsSource::Files {
            cert: fx.home().join("tls/mine.pem"),
            key: "/etc/reef/key.pem".into(),
        })
    );
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    let config = fx
        .load(
            &[],
            &["daemon.tls.self_signed=true", "daemon.rate_limit=30"],
        )
        .unwrap();
    assert_eq!(config.daemon.tls, Some(TlsSource::SelfSigned));
    assert_eq!(config.daemon.rate_limit, Some(30));
}

#[test]
fn bad_values_name_their_key() {
    for (toml, key, says) in [
        (
            "[daemon]\nhosts = [\"https://reef.example.com\"]\n",
            "daemon.hosts",
            "not a host name but a URL",
        ),
        (
            "[daemon]\nhosts = [\"reef:http\"]\n",
            "daemon.hosts",
            "not a port",
        ),
        (
            "[daemon.tls]\ncert = \"c.pem\"\n",
            "daemon.tls.key",
            "needs its private key",
        ),
        (
            "[daemon.tls]\nkey = \"k.pem\"\n",
            "daemon.tls.cert",
            "needs its certificate",
        ),
        (
            "[daemon.tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\nself_signed = true\n",
            "daemon.tls.self_signed",
            "not both",
        ),
        (
            "[daemon.tls]\ncert = \"\"\nkey = \"k\"\n",
            "daemon.tls.cert",
            "empty",
        ),
        ("[daemon]\nrate_limit = -1\n", "daemon.rate_limit", ""),
        ("[daemon.tls]\nself_signd = true\n", "self_signd", ""),
    ] {
        let err = error_of(toml);
        assert!(err.contains(key) && err.contains(says), "{toml}\n{err}");
    }
}

#[test]
fn the_quic_gateway_is_off_until_its_table_is_set() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    assert_eq!(fx.load(&[], &[]).unwrap().gateway.quic, None);

    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!("{MAIN}\n[gateway.quic]\n"),
    );
    let quic = fx.load(&[], &[]).unwrap().gateway.quic.unwrap();
    assert_eq!(quic.listen, "0.0.0.0:4433".parse().unwrap());
    assert_eq!(quic.tls, TlsSource::SelfSigned);
    assert_eq!((quic.max_streams, quic.recheck_secs), (256, 5));

    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!(
            "{MAIN}\n[gateway.quic]\nlisten = \"127.0.0.1:9443\"\ncert = \"q.pem\"\nkey = \"q.key\"\n\
             max_streams = 100\nrecheck_secs = 1\n"
        ),
    );
    let quic = fx.load(&[], &[]).unwrap().gateway.quic.unwrap();
    assert_eq!(quic.listen, "127.0.0.1:9443".parse().unwrap());
    assert_eq!(
        quic.tls,
        TlsSource::Files {
            cert: fx.home().join("q.pem"),
            key: fx.home().join("q.key"),
        }
    );
    assert_eq!((quic.max_streams, quic.recheck_secs), (100, 1));
}

#[test]
fn bad_quic_gateway_settings_name_their_key() {
    for (toml, key, says) in [
        (
            "listen = \"everywhere\"",
            "gateway.quic.listen",
            "0.0.0.0:4433",
        ),
        ("cert = \"q.pem\"", "gateway.quic.key", "private key"),
        ("key = \"q.key\"", "gateway.quic.cert", "certificate"),
        (
            "max_streams = 0",
            "gateway.quic.max_streams",
            "between 1 and 10000",
        ),
        (
            "recheck_secs = 0",
            "gateway.quic.recheck_secs",
            "between 1 and 3600",
        ),
        ("port = 1", "port", "unknown"),
    ] {
        let err = error_of(&format!("[gateway.quic]\n{toml}\n"));
        assert!(err.contains(key) && err.contains(says), "{toml}: {err}");
    }
}
