//! Bad configuration fails fast with an error naming the file, the key and the expectation.

use crate::{Fixture, MAIN};
use reef_config::ConfigError;
use std::path::Path;

#[test]
fn wrong_type_names_file_key_and_expectation() {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!("{MAIN}\n[agent]\nmax_rounds = \"lots\"\n"),
    );
    let err = fx.load(&[], &[]).unwrap_err();
    assert!(matches!(err, ConfigError::Invalid { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&fx.home().join("reef.toml").display().to_string()),
        "{text}"
    );
    assert!(text.contains("agent.max_rounds"), "{text}");
    assert!(text.contains("expected u32"), "{text}");
}

#[test]
fn unknown_wire_api_lists_the_valid_ones() {
    let fx = Fixture::new();
    fx.write(
        Path::new("project/reef.toml"),
        "[providers.main]\nwire_api = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\n",
    );
    let text = fx.load(&[], &[]).unwrap_err().to_string();
    assert!(text.contains("providers.main.wire_api"), "{text}");
    assert!(
        text.contains("openai-chat") && text.contains("anthropic"),
        "{text}"
    );
}

#[test]
fn unknown_keys_are_rejected() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), "[agent]\nmax_round = 3\n");
    let text = fx.load(&[], &[]).unwrap_err().to_string();
    assert!(text.contains("max_round"), "{text}");
}

#[test]
fn syntax_errors_name_the_file() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), "[agent\nmax_rounds = 3\n");
    let err = fx.load(&[], &[]).unwrap_err();
    assert!(matches!(err, ConfigError::Syntax { .. }), "{err:?}");
    assert!(err.to_string().contains("reef.toml"));
}

#[test]
fn env_errors_name_the_variable() {
    let fx = Fixture::new();
    let text = fx
        .load(&[("REEF_WIRE_API", "grpc"), ("REEF_MODEL", "m")], &[])
        .unwrap_err()
        .to_string();
    assert!(text.contains("REEF_WIRE_API"), "{text}");
}

#[test]
fn missing_fields_and_dangling_default_are_explained() {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        "[providers.main]\nmodel = \"m\"\n",
    );
    let text = fx.load(&[], &[]).unwrap_err().to_string();
    assert!(
        text.contains("providers.main.base_url") && text.contains("missing"),
        "{text}"
    );

    let fx2 = Fixture::new();
    fx2.write(Path::new("home/reef.toml"), MAIN);
    let text = fx2
        .load(&[], &["model.default=backup"])
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("model.default") && text.contains("backup"),
        "{text}"
    );
    assert!(text.contains("defined: main"), "{text}");
}

#[test]
fn bad_overrides_are_rejected() {
    let fx = Fixture::new();
    let text = fx.load(&[], &["agent.max_rounds"]).unwrap_err().to_string();
    assert!(text.contains("key=value"), "{text}");
    let text = fx
        .load(&[], &["agent.max_rounds=0"])
        .unwrap_err()
        .to_string();
    assert!(text.contains("at least 1"), "{text}");
    let text = fx
        .load(&[], &["agent.max_rounds=abc"])
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("-c") && text.contains("agent.max_rounds"),
        "{text}"
    );
}
