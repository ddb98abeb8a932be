//! `[secrets.NAME]`: references only, validated with errors naming the key.

use crate::Fixture;
use reef_core::{SecretSource, SecretSpec};
use std::path::Path;

#[test]
fn secrets_resolve_to_references_sorted_by_name() {
    let fx = Fixture::new();
    fx.write(
        Path::new("home/reef.toml"),
        "[secrets.GITHUB_TOKEN]\nenv = \"AGENT_GH_TOKEN\"\ndescription = \"repo scope\"\n\
         [secrets.DEPLOY_KEY]\nfile = \"keys/deploy\"\n",
    );
    let config = fx
        .load(&[("AGENT_GH_TOKEN", "ghp_value_never_loaded")], &[])
        .unwrap();
    assert_eq!(
        config.secrets,
        [
            SecretSpec {
                name: "DEPLOY_KEY".into(),
                source: SecretSource::File(fx.home().join("keys/deploy")),
                description: None,
                policy: Default::default(),
            },
            SecretSpec {
                name: "GITHUB_TOKEN".into(),
                source: SecretSource::Env("AGENT_GH_TOKEN".into()),
                description: Some("repo scope".into()),
                policy: Default::default(),
            },
        ]
    );
    // `config show` lists the reference, never a value.
    let shown: String = config
        .entries()
        .iter()
        .map(|e| format!("{} = {}\n", e.key, e.value))
        .collect();
    assert!(shown.contains("AGENT_GH_TOKEN"), "{shown}");
    assert!(!shown.contains("ghp_value_never_loaded"), "{shown}");
}

#[test]
fn bad_secret_entries_name_the_key_and_the_fix() {
    for (toml, needle) in [
        ("[secrets.bad-name]\nenv = \"X\"\n", "letters, digits and _"),
        (
            "[secrets.A]\nenv = \"X\"\nfile = \"f\"\n",
            "either env or file",
        ),
        ("[secrets.A]\ndescription = \"d\"\n", "env = \"VARIABLE\""),
        (
            "[secrets.A]\nenv = \"NOT A VAR\"\n",
            "not an environment variable name",
        ),
        ("[secrets.A]\nvalue = \"inline-secret\"\n", "value"),
    ] {
        let fx = Fixture::new();
        fx.write(Path::new("home/reef.toml"), toml);
        let text = fx.load(&[], &[]).unwrap_err().to_string();
        assert!(text.contains("secrets."), "{toml}: {text}");
        assert!(text.contains(needle), "{toml}: {text}");
    }
}
