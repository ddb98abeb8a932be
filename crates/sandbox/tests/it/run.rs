//! Normal runs: exit codes, captured streams, cwd, environment, stdin and output caps.

use crate::support::{sandbox, sh};
use reef_sandbox::{DEFAULT_ENV_ALLOW, ExecRequest, Sandbox, SandboxError, SandboxPolicy};
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test]
async fn exit_code_and_streams_are_captured() {
    let dir = tempfile::tempdir().unwrap();
    let out = sandbox()
        .run(sh("echo out; echo err >&2; exit 3", dir.path()))
        .await
        .unwrap();
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.signal, None);
    assert!(!out.timed_out);
    assert!(!out.success());
}

#[tokio::test]
async fn success_is_exit_zero() {
    let dir = tempfile::tempdir().unwrap();
    let out = sandbox().run(sh("true", dir.path())).await.unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(out.success());
}

#[tokio::test]
async fn cwd_is_honoured_and_home_is_the_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let out = sandbox()
        .run(sh("pwd -P; echo \"$HOME\"", dir.path()))
        .await
        .unwrap();
    let canon = dir.path().canonicalize().unwrap();
    let mut lines = out.stdout.lines();
    assert_eq!(lines.next().unwrap(), canon.to_str().unwrap());
    assert_eq!(lines.next().unwrap(), dir.path().to_str().unwrap());
}

#[tokio::test]
async fn environment_is_scrubbed() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = ExecRequest::new(
        "env",
        vec![],
        dir.path().to_path_buf(),
        Duration::from_secs(30),
    );
    req.env.push(("REEF_EXTRA".into(), "1".into()));
    let out = sandbox().run(req).await.unwrap();
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr);

    let mut allowed: BTreeSet<&str> = DEFAULT_ENV_ALLOW.iter().copied().collect();
    allowed.insert("HOME");
    allowed.insert("REEF_EXTRA");
    let names: BTreeSet<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for name in &names {
        assert!(
            allowed.contains(name),
            "unexpected variable {name} in child env"
        );
    }
    assert!(out.stdout.contains("REEF_EXTRA=1\n"));
    assert!(names.contains("HOME"));
    // cargo sets this for the test process; it must not leak into the child.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    assert!(!names.contains("CARGO_MANIFEST_DIR"));
}

#[tokio::test]
async fn stdin_is_fed_when_given_and_null_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = ExecRequest::new(
        "cat",
        vec![],
        dir.path().to_path_buf(),
        Duration::from_secs(30),
    );
    req.stdin = Some(b"hello stdin".to_vec());
    let out = sandbox().run(req).await.unwrap();
    assert_eq!(out.stdout, "hello stdin");

    let req = ExecRequest::new(
        "cat",
        vec![],
        dir.path().to_path_buf(),
        Duration::from_secs(30),
    );
    let out = sandbox().run(req).await.unwrap();
    assert_eq!(out.stdout, "");
    assert_eq!(out.exit_code, Some(0));
}

#[tokio::test]
async fn output_is_capped_per_stream() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxPolicy {
        max_output_bytes: 1000,
        ..SandboxPolicy::default()
    });
    let out = sandbox
        .run(sh(
            "head -c 200000 /dev/zero | tr '\\0' a; echo small >&2",
            dir.path(),
        ))
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.stdout.bytes().all(|b| b == b'a'));
    assert!(out.stdout_truncated);
    assert_eq!(out.stderr, "small\n");
    assert!(!out.stderr_truncated);
}

#[tokio::test]
async fn missing_cwd_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = sandbox()
        .run(sh("true", &dir.path().join("nope")))
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::CwdMissing { .. }), "{err}");
    assert!(err.to_string().contains("nope"));
}

#[tokio::test]
async fn spawn_failure_names_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let req = ExecRequest::new(
        "/nonexistent/reef-prog",
        vec![],
        dir.path().to_path_buf(),
        Duration::from_secs(5),
    );
    let err = sandbox().run(req).await.unwrap_err();
    assert!(matches!(err, SandboxError::Spawn { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/reef-prog"));
}
