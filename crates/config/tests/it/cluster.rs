//! `[cluster]`: off unless enabled; when enabled, both engines' URLs and a node name that fits,
//! the password only from the environment, and errors that name the key and the reason.

use crate::{Fixture, MAIN};
use std::path::Path;
use std::time::Duration;

fn load(extra: &str, env: &[(&str, &str)]) -> Result<reef_config::Config, String> {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), &format!("{MAIN}\n{extra}"));
    fx.load(env, &[]).map_err(|e| e.to_string())
}

const ENABLED: &str = "[cluster]\nenabled = true\n\
    database_url = \"postgres://reef@127.0.0.1:5432/reef\"\n\
    nats_url = \"nats://127.0.0.1:4222\"\n";

#[test]
fn cluster_mode_is_off_unless_enabled_and_has_defaults() {
    assert_eq!(load("", &[]).unwrap().cluster, None);
    let disabled = format!(
        "{}enabled = false\n",
        ENABLED.replace("enabled = true\n", "")
    );
    assert_eq!(load(&disabled, &[]).unwrap().cluster, None);
    let cluster = load(ENABLED, &[]).unwrap().cluster.unwrap();
    assert_eq!(cluster.database_url, "postgres://reef@127.0.0.1:5432/reef");
    assert_eq!(cluster.nats_url, "nats://127.0.0.1:4222");
    assert_eq!(cluster.lease, Duration::from_secs(5));
    assert_eq!(cluster.max_agents, None);
    assert_eq!(cluster.database_password, None);
    // The node is named after the machine unless named.
    assert!(!cluster.node_name.is_empty());
    let named = load(
        &format!("{ENABLED}node_name = \"eu-1\"\nlease_secs = 10\nmax_agents_per_node = 40\npassword_env = \"PGPASS\"\n"),
        &[("PGPASS", "s3cret-pass")],
    )
    .unwrap()
    .cluster
    .unwrap();
    assert_eq!(named.node_name, "eu-1");
    assert_eq!(named.lease, Duration::from_secs(10));
    assert_eq!(named.max_agents, Some(40));
    let password = named.database_password.unwrap();
    assert_eq!(password.expose(), "s3cret-pass");
    assert!(!format!("{password:?}").contains("s3cret"));
}

#[test]
fn bad_cluster_settings_name_the_key_and_the_reason() {
    let without = |key: &str| {
        ENABLED
            .lines()
            .filter(|l| !l.starts_with(key))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let cases: Vec<(String, &str, &str)> = vec![
        (without("database_url"), "cluster.database_url", "missing"),
        (without("nats_url"), "cluster.nats_url", "missing"),
        (
            ENABLED.replace("postgres://reef@", "postgres://reef:pw@"),
            "cluster.database_url",
            "password_env",
        ),
        (
            ENABLED.replace("postgres://", "mysql://"),
            "cluster.database_url",
            "not a PostgreSQL URL",
        ),
        (
            ENABLED.replace("nats://", "http://"),
            "cluster.nats_url",
            "not a NATS URL",
        ),
        (
            format!("{ENABLED}node_name = \"node 1\"\n"),
            "cluster.node_name",
            "not a node name",
        ),
        (
            format!("{ENABLED}lease_secs = 0\n"),
            "cluster.lease_secs",
            "out of range",
        ),
        (
            format!("{ENABLED}max_agents_per_node = 0\n"),
            "cluster.max_agents_per_node",
            "no agent",
        ),
        (
            format!("{ENABLED}password_env = \"NOT_SET_ANYWHERE\"\n"),
            "cluster.password_env",
            "$NOT_SET_ANYWHERE",
        ),
        (format!("{ENABLED}lease = 5\n"), "lease", "unknown field"),
    ];
    for (toml, key, why) in cases {
        let err = load(&toml, &[]).unwrap_err();
        assert!(err.contains(key) && err.contains(why), "{key}: {err}");
    }
}
