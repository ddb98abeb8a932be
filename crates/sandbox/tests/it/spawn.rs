//! `Sandbox::spawn`: a long-running process spoken to over its pipes, confined like a run,
//! and gone with everything it started once dropped.

use crate::support::{confined_policy, processes_with, wait_none_with};
use reef_sandbox::{ExecRequest, Sandbox};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A line server: answers each line with `got LINE`; writes a marker on stderr first.
const LINE_SERVER: &str = "echo started >&2; while read -r line; do echo \"got $line\"; done";

fn server(dir: &std::path::Path, marker: &str) -> ExecRequest {
    ExecRequest::shell(
        &format!("{LINE_SERVER} # {marker}"),
        dir.to_path_buf(),
        Duration::from_secs(1),
    )
}

#[tokio::test]
async fn a_confined_process_answers_over_its_pipes_until_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let marker = "reef-spawn-test-answers";
    let sandbox = Sandbox::new(confined_policy());
    let mut child = sandbox.spawn(server(dir.path(), marker)).await.unwrap();
    let (stdout, mut stdin) = child.take_io().unwrap();
    assert!(child.take_io().is_none(), "the pipes are handed out once");
    let mut lines = BufReader::new(stdout).lines();
    // The request's timeout (1 s) does not apply to a spawned process: it still answers later.
    for word in ["one", "two"] {
        stdin
            .write_all(format!("{word}\n").as_bytes())
            .await
            .unwrap();
        assert_eq!(
            lines.next_line().await.unwrap().unwrap(),
            format!("got {word}")
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert!(
        child.stderr_tail().contains("started"),
        "{}",
        child.stderr_tail()
    );
    assert!(child.try_status().is_none());
    assert!(!processes_with(marker).is_empty());
    drop(child);
    assert_eq!(wait_none_with(marker).await, Vec::<i32>::new());
}

#[tokio::test]
async fn kill_ends_the_process_and_its_exit_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let marker = "reef-spawn-test-kill";
    let sandbox = Sandbox::new(confined_policy());
    let mut child = sandbox.spawn(server(dir.path(), marker)).await.unwrap();
    let (stdout, _stdin) = child.take_io().unwrap();
    child.kill();
    let status = child.wait().await.unwrap();
    assert!(!status.success());
    // Its stdout reaches end of file: a reader learns the server is gone.
    let mut lines = BufReader::new(stdout).lines();
    assert_eq!(lines.next_line().await.unwrap(), None);
    assert_eq!(wait_none_with(marker).await, Vec::<i32>::new());
}

#[tokio::test]
async fn a_spawned_process_is_confined_like_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    let policy = reef_sandbox::SandboxPolicy {
        hidden: vec![outside.path().to_path_buf()],
        ..confined_policy()
    };
    let sandbox = Sandbox::new(policy);
    let script = format!("cat {}/secret; echo \"exit=$?\"", outside.path().display());
    let mut child = sandbox
        .spawn(ExecRequest::shell(
            &script,
            dir.path().to_path_buf(),
            Duration::from_secs(5),
        ))
        .await
        .unwrap();
    let (stdout, _stdin) = child.take_io().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        seen.push(line);
    }
    assert!(!seen.iter().any(|l| l.contains("s3cret")), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("exit=1"), "{seen:?}");
    assert!(child.wait().await.unwrap().success());
}

#[tokio::test]
async fn a_missing_start_directory_is_refused_before_spawning() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(confined_policy());
    let err = sandbox
        .spawn(server(dir.path(), "never").in_dir("absent"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, reef_sandbox::SandboxError::CwdMissing { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn a_spawned_process_keeps_its_session_after_the_sandbox_value_is_dropped() {
    // The helper joins the session's cgroups after it starts; they must still exist then.
    let dir = tempfile::tempdir().unwrap();
    let mut child = Sandbox::new(confined_policy())
        .spawn(server(dir.path(), "reef-spawn-test-dropped"))
        .await
        .unwrap();
    let (stdout, mut stdin) = child.take_io().unwrap();
    stdin.write_all(b"ping\n").await.unwrap();
    let mut lines = BufReader::new(stdout).lines();
    assert_eq!(
        lines.next_line().await.unwrap().as_deref(),
        Some("got ping"),
        "{}",
        child.stderr_tail()
    );
}
