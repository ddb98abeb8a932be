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

#[test]
fn sampling_is_range_checked_and_refused_where_the_wire_has_none() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    let config = fx
        .load(
            &[],
            &[
                "providers.main.temperature=0.3",
                "providers.main.top_k=40",
                "providers.main.seed=11",
            ],
        )
        .unwrap();
    let sampling = config.providers["main"].sampling;
    assert_eq!(sampling.temperature, Some(0.3));
    assert_eq!(sampling.top_k, Some(40));
    assert_eq!(sampling.seed, Some(11));
    assert_eq!(sampling.top_p, None);

    for (key, expect) in [
        (
            "providers.main.temperature=3.5",
            "providers.main.temperature",
        ),
        ("providers.main.top_p=0", "providers.main.top_p"),
        ("providers.main.top_k=0", "providers.main.top_k"),
        (
            "providers.main.repeat_penalty=-1",
            "providers.main.repeat_penalty",
        ),
    ] {
        let text = fx.load(&[], &[key]).unwrap_err().to_string();
        assert!(text.contains(expect), "{key}: {text}");
    }
    let text = fx
        .load(
            &[],
            &[
                "providers.a.wire_api=anthropic",
                "providers.a.base_url=https://api.anthropic.com/v1",
                "providers.a.model=claude",
                "providers.a.seed=1",
            ],
        )
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("providers.a.seed") && text.contains("not supported"),
        "{text}"
    );
}

#[test]
fn an_unknown_agent_profile_lists_the_valid_ones() {
    let fx = Fixture::new();
    let config = fx.load(&[], &["agent.profile=small"]).unwrap();
    assert_eq!(config.agent.profile, reef_core::AgentProfile::Small);
    let text = fx
        .load(&[], &["agent.profile=tiny"])
        .unwrap_err()
        .to_string();
    assert!(text.contains("agent.profile"), "{text}");
    assert!(
        text.contains("auto") && text.contains("standard") && text.contains("small"),
        "{text}"
    );
}
