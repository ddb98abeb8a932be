//! Precedence of layers and the origin recorded for each value.

use crate::{Fixture, MAIN};
use reef_config::{LoadOptions, Origin};
use reef_core::WireApi;
use std::path::Path;

fn origin(config: &reef_config::Config, key: &str) -> Origin {
    config
        .entries()
        .iter()
        .find(|e| e.key == key)
        .unwrap_or_else(|| panic!("no entry {key}"))
        .origin
        .clone()
}

#[test]
fn defaults_apply_without_any_file() {
    let fx = Fixture::new();
    let config = fx.load(&[], &[]).unwrap();
    assert_eq!(config.agent.max_rounds, 25);
    assert_eq!(config.tools.shell_timeout_secs, 30);
    assert_eq!(config.store_path, fx.home().join("reef.db"));
    assert!(config.default_provider.is_none());
    let err = config.provider().unwrap_err().to_string();
    assert!(err.contains("no model provider"), "{err}");
    assert_eq!(origin(&config, "agent.max_rounds"), Origin::Default);
}

#[test]
fn home_file_then_project_then_env_then_cli() {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!("{MAIN}\n[agent]\nmax_rounds = 7\nmax_wall_secs = 60\n"),
    );
    fx.write(Path::new("project/reef.toml"), "[agent]\nmax_rounds = 9\n");
    let config = fx
        .load(
            &[
                ("REEF_MODEL", "from-env"),
                ("OPENAI_API_KEY", "sk-test-123456"),
            ],
            &["agent.max_wall_secs=5"],
        )
        .unwrap();
    let p = config.provider().unwrap();
    assert_eq!(p.name, "main");
    assert_eq!(p.wire_api, WireApi::OpenaiChat);
    assert_eq!(p.model, "from-env");
    assert_eq!(p.api_key.as_ref().unwrap().expose(), "sk-test-123456");
    assert_eq!(config.agent.max_rounds, 9);
    assert_eq!(config.agent.max_wall_secs, 5);
    assert_eq!(
        origin(&config, "agent.max_rounds"),
        Origin::File(fx.project().join("reef.toml"))
    );
    assert_eq!(origin(&config, "agent.max_wall_secs"), Origin::Cli);
    assert_eq!(
        origin(&config, "providers.main.model"),
        Origin::Env("REEF_MODEL".into())
    );
    assert_eq!(
        origin(&config, "providers.main.base_url"),
        Origin::File(fx.home().join("reef.toml"))
    );
    assert_eq!(config.files.len(), 2);
}

#[test]
fn env_alone_defines_a_provider() {
    let fx = Fixture::new();
    let config = fx
        .load(
            &[
                ("REEF_WIRE_API", "anthropic"),
                ("REEF_BASE_URL", "http://127.0.0.1:9/v1"),
                ("REEF_MODEL", "claude-x"),
                ("REEF_API_KEY", "secret-key-abcdef"),
            ],
            &[],
        )
        .unwrap();
    let p = config.provider().unwrap();
    assert_eq!(p.wire_api, WireApi::Anthropic);
    assert_eq!(p.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(p.api_key.as_ref().unwrap().expose(), "secret-key-abcdef");
}

#[test]
fn secrets_are_masked_everywhere() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    let config = fx
        .load(&[("OPENAI_API_KEY", "sk-very-secret-value-99")], &[])
        .unwrap();
    let entry = config
        .entries()
        .iter()
        .find(|e| e.key == "providers.main.api_key")
        .unwrap();
    assert!(!entry.value.contains("very-secret"), "{}", entry.value);
    assert_eq!(entry.origin, Origin::Env("OPENAI_API_KEY".into()));
    let debug = format!("{config:?}");
    assert!(!debug.contains("very-secret"), "Debug leaks the key");
}

#[test]
fn cli_values_parse_as_toml_or_string() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    let config = fx
        .load(
            &[],
            &[
                "providers.main.model=llama-3",
                "tools.http_allow_private=true",
            ],
        )
        .unwrap();
    assert_eq!(config.provider().unwrap().model, "llama-3");
    assert!(config.tools.http_allow_private);
}

#[test]
fn home_comes_from_home_when_reef_home_is_unset() {
    let opts = LoadOptions::from_env(
        [("HOME".to_owned(), "/tmp/somebody".to_owned())],
        None,
        Vec::new(),
    )
    .unwrap();
    assert_eq!(opts.home, Path::new("/tmp/somebody/.reef"));
    assert!(LoadOptions::from_env(Vec::<(String, String)>::new(), None, Vec::new()).is_err());
}
