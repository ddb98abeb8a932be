//! Setup from configuration: the `[sandbox]` section becomes the tools' sandbox policy, and a
//! backend that cannot run falls back with a warning or, when required, refuses.

use reef_agent::AgentError;
use reef_config::{Config, LoadOptions};
use reef_sandbox::{HelperCommand, Limits, NetworkMode, SandboxBackend};
use std::path::PathBuf;

fn load(overrides: &[&str]) -> (tempfile::TempDir, Config) {
    let dir = tempfile::tempdir().unwrap();
    let opts = LoadOptions {
        home: dir.path().to_owned(),
        project_dir: None,
        env: Default::default(),
        overrides: overrides.iter().map(|s| (*s).to_owned()).collect(),
    };
    let config = Config::load(&opts).unwrap();
    (dir, config)
}

fn helper() -> HelperCommand {
    HelperCommand {
        program: PathBuf::from("/usr/local/bin/reef"),
        args: vec!["sandbox-exec".into()],
    }
}

#[test]
fn default_config_asks_for_landlock_without_network() {
    let (_dir, config) = load(&[]);
    let policy = reef_agent::policy_from_config(&config, Some(helper()));
    assert_eq!(policy.backend, SandboxBackend::Landlock);
    assert_eq!(policy.network, NetworkMode::None);
    assert_eq!(policy.limits, Limits::default());
    assert!(policy.allow_domains.is_empty() && policy.writable.is_empty());
    assert_eq!(policy.helper, Some(helper()));
}

#[test]
fn every_sandbox_key_reaches_the_policy() {
    let (_dir, config) = load(&[
        "sandbox.backend=none",
        "sandbox.network=allowlist",
        "sandbox.allow_domains=[\"pypi.org\"]",
        "sandbox.writable=[\"/tmp/reef-cache\"]",
        "sandbox.memory=256M",
        "sandbox.file_size=1M",
        "sandbox.cpu_secs=5",
        "sandbox.max_processes=16",
        "sandbox.open_files=32",
    ]);
    let policy = reef_agent::policy_from_config(&config, None);
    assert_eq!(policy.backend, SandboxBackend::Plain);
    assert_eq!(policy.network, NetworkMode::Allowlist);
    assert_eq!(policy.allow_domains, ["pypi.org"]);
    assert_eq!(policy.writable, [PathBuf::from("/tmp/reef-cache")]);
    assert_eq!(
        policy.limits,
        Limits {
            cpu_secs: Some(5),
            memory_bytes: Some(256 * 1024 * 1024),
            max_processes: Some(16),
            file_size_bytes: Some(1024 * 1024),
            open_files: Some(32),
        }
    );
    assert_eq!(policy.helper, None);
}

#[tokio::test]
async fn backend_none_runs_plain_with_a_warning() {
    let (_dir, config) = load(&["sandbox.backend=none"]);
    let (policy, warning) = reef_agent::sandbox_policy(&config, Some(helper()))
        .await
        .unwrap();
    assert_eq!(policy.backend, SandboxBackend::Plain);
    let warning = warning.unwrap();
    assert!(warning.contains("sandbox disabled by config"), "{warning}");
    assert!(warning.contains("unconfined"), "{warning}");
}

#[tokio::test]
async fn a_broken_backend_falls_back_loudly_unless_required() {
    // Without a helper the landlock backend cannot start, whatever the kernel offers.
    let (_dir, config) = load(&[]);
    let (policy, warning) = reef_agent::sandbox_policy(&config, None).await.unwrap();
    assert_eq!(policy.backend, SandboxBackend::Plain);
    let warning = warning.unwrap();
    assert!(
        warning.contains("landlock") && warning.contains("UNCONFINED"),
        "{warning}"
    );

    let (_dir, config) = load(&["sandbox.required=true"]);
    let err = reef_agent::sandbox_policy(&config, None).await.unwrap_err();
    assert!(
        matches!(err, AgentError::SandboxUnavailable { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("sandbox.required") && text.contains("landlock"),
        "{text}"
    );
}
