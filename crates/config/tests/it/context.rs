//! Context windows (`providers.NAME.context_tokens`), history compaction (`[agent]`
//! `compact_at`, `compaction`, `keep_recent_turns`) and `daemon.queue_mode`: defaults, shown
//! origins, and errors naming the key.

use crate::{Fixture, MAIN};
use reef_config::{Config, Origin};
use reef_core::{CompactionStrategy, QueueMode, WireApi};
use std::path::Path;

fn entry(config: &Config, key: &str) -> (String, Origin) {
    let e = config
        .entries()
        .iter()
        .find(|e| e.key == key)
        .unwrap_or_else(|| panic!("no entry {key}"));
    (e.value.clone(), e.origin.clone())
}

/// Loads `toml` as the home file and returns the error text, which must name `key`.
fn error_naming(toml: &str, key: &str) -> String {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), toml);
    let err = fx.load(&[], &[]).unwrap_err().to_string();
    assert!(err.contains(&format!("key `{key}`")), "{toml}\n{err}");
    err
}

fn provider(name: &str, wire: &str, model: &str) -> String {
    let url = if wire == "local" {
        String::new()
    } else {
        "base_url = \"http://127.0.0.1:9/v1\"\n".to_owned()
    };
    format!("[providers.{name}]\nwire_api = \"{wire}\"\n{url}model = \"{model}\"\n")
}

#[test]
fn default_windows_follow_the_wire_api_and_the_model() {
    let cases: [(&str, &str, &str, u32); 15] = [
        ("loc", "local", "qwen2.5-coder-1.5b-instruct", 8192),
        ("claude", "anthropic", "claude-sonnet-4-5", 200_000),
        ("g41", "openai-chat", "gpt-4.1-mini", 1_047_576),
        ("g5", "openai-chat", "gpt-5", 400_000),
        ("g5m", "openai-chat", "gpt-5-mini", 400_000),
        ("o1", "openai-chat", "o1-preview", 200_000),
        ("o3", "openai-chat", "o3-mini", 200_000),
        ("o4", "openai-chat", "o4-mini", 200_000),
        ("g4o", "openai-chat", "gpt-4o-mini", 128_000),
        ("g4t", "openai-chat", "gpt-4-turbo", 128_000),
        ("router", "openai-chat", "openai/gpt-4o", 128_000),
        ("g35", "openai-chat", "gpt-3.5-turbo", 16_385),
        ("vllm", "openai-chat", "Qwen/Qwen2.5-7B-Instruct", 8192),
        ("other", "openai-chat", "llama-3.1-8b", 8192),
        ("oll", "ollama", "llama3.1", 4096),
    ];
    let toml: String = cases
        .iter()
        .map(|(name, wire, model, _)| provider(name, wire, model))
        .collect::<Vec<_>>()
        .join("\n");
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!("[model]\ndefault = \"g4o\"\n{toml}"),
    );
    let config = fx.load(&[], &[]).unwrap();
    for (name, _, model, window) in cases {
        assert_eq!(
            config.providers[name].context_tokens, window,
            "{name} ({model})"
        );
        assert_eq!(
            entry(&config, &format!("providers.{name}.context_tokens")),
            (window.to_string(), Origin::Default),
            "{name} ({model})"
        );
    }
    assert_eq!(
        reef_config::default_context_tokens(WireApi::OpenaiChat, "GPT-4.1"),
        1_047_576
    );
}

#[test]
fn context_tokens_is_accepted_for_every_wire_api() {
    let fx = Fixture::new();
    let toml = [
        ("a", "anthropic", "claude-x", 100_000),
        ("o", "openai-chat", "my-vllm-model", 32_768),
        ("l", "ollama", "llama3.1", 16_384),
        ("loc", "local", "qwen2.5-coder-1.5b-instruct", 4096),
    ]
    .iter()
    .map(|(name, wire, model, window)| {
        format!("{}context_tokens = {window}\n", provider(name, wire, model))
    })
    .collect::<Vec<_>>()
    .join("\n");
    fx.write(
        Path::new("home/reef.toml"),
        &format!("[model]\ndefault = \"o\"\n{toml}"),
    );
    let config = fx.load(&[], &["providers.o.context_tokens=65536"]).unwrap();
    let windows: Vec<u32> = ["a", "o", "l", "loc"]
        .iter()
        .map(|n| config.providers[*n].context_tokens)
        .collect();
    assert_eq!(windows, [100_000, 65_536, 16_384, 4096]);
    assert_eq!(
        entry(&config, "providers.a.context_tokens"),
        ("100000".into(), Origin::File(fx.home().join("reef.toml")))
    );
    assert_eq!(
        entry(&config, "providers.o.context_tokens"),
        ("65536".into(), Origin::Cli)
    );
}

#[test]
fn context_tokens_out_of_range_names_the_key() {
    for (wire, model, window) in [
        ("openai-chat", "gpt-4o", 100),
        ("anthropic", "claude-x", 511),
        ("ollama", "llama3.1", 1_048_577),
        ("local", "qwen2.5-coder-1.5b-instruct", 2_000_000),
    ] {
        let toml = format!("{}context_tokens = {window}\n", provider("p", wire, model));
        let err = error_naming(&toml, "providers.p.context_tokens");
        assert!(
            err.contains(&window.to_string()) && err.contains("512..=1048576"),
            "{err}"
        );
    }
    // The bounds themselves are accepted.
    for window in [512, 1_048_576] {
        let fx = Fixture::new();
        fx.write(
            Path::new("home/reef.toml"),
            &format!(
                "{}context_tokens = {window}\n",
                provider("p", "openai-chat", "m")
            ),
        );
        // 512 tokens hold at most 8 kept turns.
        let config = fx.load(&[], &["agent.keep_recent_turns=8"]).unwrap();
        assert_eq!(config.providers["p"].context_tokens, window);
    }
}

#[test]
fn compaction_defaults_are_applied_and_shown() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    let config = fx.load(&[], &[]).unwrap();
    let agent = &config.agent;
    assert_eq!(agent.compact_at, 0.75);
    assert_eq!(agent.compaction, CompactionStrategy::Summarize);
    assert_eq!(agent.keep_recent_turns, 4);
    assert_eq!(
        entry(&config, "agent.compact_at"),
        ("0.75".into(), Origin::Default)
    );
    assert_eq!(
        entry(&config, "agent.compaction"),
        ("\"summarize\"".into(), Origin::Default)
    );
    assert_eq!(
        entry(&config, "agent.keep_recent_turns"),
        ("4".into(), Origin::Default)
    );
    // The zero-configuration local model has room for the default too.
    let bare = Fixture::new().load(&[], &[]).unwrap();
    assert_eq!(bare.agent.keep_recent_turns, 4);
}

#[test]
fn compaction_settings_are_read() {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        &format!(
            "{MAIN}\n[agent]\ncompact_at = 1\ncompaction = \"archive\"\nkeep_recent_turns = 10\n"
        ),
    );
    let config = fx.load(&[], &[]).unwrap();
    assert_eq!(config.agent.compact_at, 1.0);
    assert_eq!(config.agent.compaction, CompactionStrategy::Archive);
    assert_eq!(config.agent.keep_recent_turns, 10);
    assert_eq!(
        entry(&config, "agent.compaction").1,
        Origin::File(fx.home().join("reef.toml"))
    );
    let config = fx
        .load(&[], &["agent.compaction=truncate", "agent.compact_at=0.5"])
        .unwrap();
    assert_eq!(config.agent.compaction, CompactionStrategy::Truncate);
    assert_eq!(config.agent.compact_at, 0.5);
    assert_eq!(entry(&config, "agent.compaction").1, Origin::Cli);
}

#[test]
fn compact_at_must_be_a_fraction_of_the_window() {
    for value in ["0", "0.0", "-0.5", "1.01", "2", "nan", "inf"] {
        let err = error_naming(
            &format!("{MAIN}\n[agent]\ncompact_at = {value}\n"),
            "agent.compact_at",
        );
        assert!(err.contains("> 0 and <= 1"), "{err}");
    }
}

#[test]
fn an_unknown_compaction_lists_the_strategies() {
    let err = error_naming(
        &format!("{MAIN}\n[agent]\ncompaction = \"squash\"\n"),
        "agent.compaction",
    );
    assert!(
        err.contains("squash")
            && err.contains("summarize")
            && err.contains("truncate")
            && err.contains("archive"),
        "{err}"
    );
}

#[test]
fn keep_recent_turns_must_be_positive() {
    let err = error_naming(
        &format!("{MAIN}\n[agent]\nkeep_recent_turns = 0\n"),
        "agent.keep_recent_turns",
    );
    assert!(err.contains("at least 1"), "{err}");
}

#[test]
fn keep_recent_turns_must_fit_the_smallest_window() {
    // 8192 / 64 = 128 turns fit the local model's default window; 129 do not.
    let toml = format!(
        "[model]\ndefault = \"big\"\n{}\n{}",
        provider("big", "anthropic", "claude-x"),
        provider("small", "local", "qwen2.5-coder-1.5b-instruct")
    );
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), &toml);
    let config = fx.load(&[], &["agent.keep_recent_turns=128"]).unwrap();
    assert_eq!(config.agent.keep_recent_turns, 128);

    let err = error_naming(
        &format!("{toml}\n[agent]\nkeep_recent_turns = 129\n"),
        "agent.keep_recent_turns",
    );
    assert!(
        err.contains(
            "129 turns cannot fit the 8192-token window of provider `small` (at most 128)"
        ),
        "{err}"
    );

    // A provider's own context_tokens counts, whichever wire it uses.
    let err = error_naming(
        &format!("{MAIN}context_tokens = 1024\n[agent]\nkeep_recent_turns = 17\n"),
        "agent.keep_recent_turns",
    );
    assert!(
        err.contains("1024-token window of provider `main` (at most 16)"),
        "{err}"
    );
}

#[test]
fn queue_mode_defaults_to_followup() {
    let fx = Fixture::new();
    fx.write(Path::new("home/reef.toml"), MAIN);
    let config = fx.load(&[], &[]).unwrap();
    assert_eq!(config.daemon.queue_mode, QueueMode::Followup);
    assert_eq!(
        entry(&config, "daemon.queue_mode"),
        ("\"followup\"".into(), Origin::Default)
    );
    for mode in QueueMode::ALL {
        let config = fx
            .load(&[], &[&format!("daemon.queue_mode={}", mode.as_str())])
            .unwrap();
        assert_eq!(config.daemon.queue_mode, mode);
        assert_eq!(entry(&config, "daemon.queue_mode").1, Origin::Cli);
    }
}

#[test]
fn an_unknown_queue_mode_lists_the_modes() {
    let err = error_naming(
        &format!("{MAIN}\n[daemon]\nqueue_mode = \"interrupt\"\n"),
        "daemon.queue_mode",
    );
    assert!(
        err.contains("interrupt")
            && err.contains("followup")
            && err.contains("steer")
            && err.contains("collect"),
        "{err}"
    );
}
