//! Stopping processes: timeouts, ignored SIGTERM, background grandchildren, cancellation.

use crate::support::{sandbox, wait_gone};
use reef_sandbox::ExecRequest;
use std::time::Duration;

#[tokio::test]
async fn timeout_kills_sleep() {
    let dir = tempfile::tempdir().unwrap();
    let req = ExecRequest::new(
        "sleep",
        vec!["100".into()],
        dir.path().to_path_buf(),
        Duration::from_millis(300),
    );
    let out = sandbox().run(req).await.unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(out.signal, Some(15));
}

#[tokio::test]
async fn timeout_kills_a_process_ignoring_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let req = ExecRequest::shell(
        "trap '' TERM; echo started; sleep 100; echo survived",
        dir.path().to_path_buf(),
        Duration::from_millis(300),
    );
    let out = sandbox().run(req).await.unwrap();
    assert!(out.timed_out);
    assert_eq!(out.signal, Some(9));
    assert_eq!(out.stdout, "started\n");
}

#[tokio::test]
async fn background_grandchild_is_killed_when_the_child_exits() {
    let dir = tempfile::tempdir().unwrap();
    let req = ExecRequest::shell(
        "sleep 100 & echo $!",
        dir.path().to_path_buf(),
        Duration::from_secs(30),
    );
    let out = sandbox().run(req).await.unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.timed_out);
    let pid: i32 = out.stdout.trim().parse().unwrap();
    assert!(wait_gone(pid).await, "grandchild {pid} still running");
}

#[tokio::test]
async fn dropping_the_future_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let req = ExecRequest::shell(
        "echo $$ > shpid; sleep 100 & echo $! > sleeppid; wait",
        dir.path().to_path_buf(),
        Duration::from_secs(300),
    );
    let sandbox = sandbox();
    let run = sandbox.run(req);
    let read_pids = async {
        loop {
            let read = |name: &str| {
                std::fs::read_to_string(dir.path().join(name))
                    .ok()
                    .and_then(|t| t.trim().parse::<i32>().ok())
            };
            if let (Some(sh), Some(sleep)) = (read("shpid"), read("sleeppid")) {
                return (sh, sleep);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (sh_pid, sleep_pid) = tokio::select! {
        res = run => panic!("run finished unexpectedly: {res:?}"),
        pids = read_pids => pids,
    };
    // `run` has been dropped by now: both the shell and its background child must die.
    assert!(
        wait_gone(sh_pid).await,
        "shell {sh_pid} survived cancellation"
    );
    assert!(
        wait_gone(sleep_pid).await,
        "grandchild {sleep_pid} survived cancellation"
    );
}

#[tokio::test]
async fn a_grandchild_that_left_the_group_cannot_hold_the_pipes_open() {
    // `setsid` puts the grandchild outside the process group, so the group kill misses it,
    // and it keeps stdout/stderr open: the run must still return promptly.
    let dir = tempfile::tempdir().unwrap();
    for (command, timeout) in [
        ("setsid sleep 8 & echo done", Duration::from_secs(30)),
        ("setsid sleep 8 & sleep 30", Duration::from_millis(300)),
    ] {
        let req = ExecRequest::shell(command, dir.path().to_path_buf(), timeout);
        let started = std::time::Instant::now();
        let out = tokio::time::timeout(Duration::from_secs(10), sandbox().run(req))
            .await
            .expect("run hung on pipes held by a process outside the group")
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "{command}");
        if !out.timed_out {
            assert_eq!(out.stdout, "done\n");
        }
    }
}
