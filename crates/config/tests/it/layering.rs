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
    // Zero configuration: the embedded local model is the default provider.
    assert!(config.implicit_local);
    assert_eq!(config.model_chain, ["local"]);
    let local = config.provider().unwrap();
    assert_eq!(local.wire_api, WireApi::Local);
    assert_eq!(local.model, reef_config::DEFAULT_LOCAL_MODEL);
    assert_eq!(
        local.model_path.as_deref(),
        Some(
            fx.home()
                .join("models/qwen2.5-coder-1.5b-instruct.gguf")
                .as_path()
        )
    );
    assert_eq!((local.threads, local.context_tokens), (None, 8192));
    assert_eq!(config.models.index_url, "https://pypi.org/simple");
    assert_eq!(origin(&config, "agent.max_rounds"), Origin::Default);
    assert_eq!(origin(&config, "providers.local.model"), Origin::Default);
}

#[test]
fn local_providers_are_validated_field_by_field() {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        "[models]\ndir = \"/srv/gguf\"\n[providers.small]\nwire_api = \"local\"\nmodel = \"qwen2.5-coder-0.5b-instruct\"\nthreads = 3\ncontext_tokens = 4096\n[providers.mine]\nwire_api = \"local\"\nmodel = \"custom\"\nmodel_path = \"custom/q8.gguf\"\n[model]\ndefault = [\"small\", \"mine\"]\n",
    );
    let config = fx.load(&[], &[]).unwrap();
    assert!(!config.implicit_local);
    let small = &config.providers["small"];
    assert_eq!(
        small.model_path.as_deref(),
        Some(Path::new("/srv/gguf/qwen2.5-coder-0.5b-instruct.gguf"))
    );
    assert_eq!((small.threads, small.context_tokens), (Some(3), 4096));
    assert_eq!(
        config.providers["mine"].model_path.as_deref(),
        Some(Path::new("/srv/gguf/custom/q8.gguf"))
    );

    let cases = [
        (
            "[providers.l]\nwire_api = \"local\"\nbase_url = \"http://x\"\n",
            "providers.l.base_url",
            "no base_url",
        ),
        (
            "[providers.l]\nwire_api = \"local\"\nthreads = 0\n",
            "providers.l.threads",
            "at least 1",
        ),
        (
            "[providers.l]\nwire_api = \"local\"\ncontext_tokens = 100\n",
            "providers.l.context_tokens",
            "out of range",
        ),
        (
            "[providers.o]\nbase_url = \"http://x\"\nmodel = \"m\"\nthreads = 2\n",
            "providers.o.threads",
            "only applies to wire_api = \"local\"",
        ),
        (
            "[models]\nindex_url = \"pypi.org\"\n",
            "models.index_url",
            "not an http",
        ),
    ];
    for (toml, key, message) in cases {
        fx.write(Path::new("home/reef.toml"), toml);
        let err = fx.load(&[], &[]).unwrap_err().to_string();
        assert!(
            err.contains(&format!("`{key}`")) && err.contains(message),
            "{toml}: {err}"
        );
    }
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
