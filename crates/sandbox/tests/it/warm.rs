//! The warm sandbox of a session: commands forked from one sandbox built once, each with its
//! own process tree, status, stdin and cgroup; a sandbox that dies is replaced (and a command
//! that had not started yet is run on the new one, once); a change of what the sandbox shows
//! builds another.

use crate::support::{confined_policy, sh, wait_gone};
use reef_sandbox::{ExecRequest, Sandbox, SandboxError, SandboxPolicy};
use std::time::Duration;

fn workspace() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

async fn run(sandbox: &Sandbox, req: ExecRequest) -> reef_sandbox::ExecOutput {
    let out = sandbox.run(req).await.unwrap();
    assert_ne!(
        out.exit_code,
        Some(125),
        "the sandbox was not built: {out:?}"
    );
    out
}

#[tokio::test]
async fn commands_of_a_session_share_one_warm_sandbox_and_report_their_own_end() {
    let ws = workspace();
    let sandbox = Sandbox::new(confined_policy());
    assert_eq!(sandbox.warm_pid().await, None);
    let out = run(&sandbox, sh("echo one; exit 3", ws.path())).await;
    assert_eq!((out.stdout.as_str(), out.exit_code), ("one\n", Some(3)));
    let pid = sandbox.warm_pid().await.expect("a warm sandbox runs");

    let out = run(&sandbox, sh("kill -9 $$", ws.path())).await;
    assert_eq!((out.exit_code, out.signal), (None, Some(9)), "{out:?}");

    let mut req = sh("cat; echo err >&2", ws.path());
    req.stdin = Some(b"from stdin\n".to_vec());
    let out = run(&sandbox, req).await;
    assert_eq!(out.stdout, "from stdin\n");
    assert_eq!(out.stderr, "err\n");
    assert!(out.success());

    // Each command is PID-1's child, not a sandbox of its own.
    let out = run(&sandbox, sh("echo $PPID", ws.path())).await;
    assert_eq!(out.stdout, "1\n");
    assert_eq!(
        sandbox.warm_pid().await,
        Some(pid),
        "the warm sandbox was rebuilt"
    );

    // It ends with the session.
    drop(sandbox);
    assert!(
        wait_gone(pid as i32).await,
        "the warm sandbox {pid} outlived its session"
    );
}

#[tokio::test]
async fn commands_running_at_once_each_finish_with_their_own_output() {
    let ws = workspace();
    let sandbox = Sandbox::new(confined_policy());
    let slow = run(&sandbox, sh("true", ws.path()));
    slow.await;
    let (a, b) = tokio::join!(
        run(
            &sandbox,
            sh(
                "while [ ! -e b.done ]; do sleep 0.01; done; echo a",
                ws.path()
            )
        ),
        run(&sandbox, sh("echo b; touch b.done", ws.path())),
    );
    assert_eq!((a.stdout.as_str(), b.stdout.as_str()), ("a\n", "b\n"));
    assert!(a.success() && b.success());
}

#[tokio::test]
async fn each_command_gets_a_cgroup_of_its_own_reused_by_later_ones() {
    let ws = workspace();
    let sandbox = Sandbox::new(confined_policy());
    let first = run(&sandbox, sh("cat /proc/self/cgroup", ws.path())).await;
    if !sandbox.limit_problems().is_empty() {
        // No writable cgroups on this machine: nothing to check (reef says so in its status).
        return;
    }
    let cgroups = |out: &reef_sandbox::ExecOutput| -> Vec<String> {
        out.stdout
            .lines()
            .filter(|l| l.contains("/reef-sessions/"))
            .map(str::to_owned)
            .collect()
    };
    let mine = cgroups(&first);
    assert!(
        !mine.is_empty() && mine.iter().all(|l| l.ends_with("/c-0")),
        "not in a command cgroup: {}",
        first.stdout
    );
    // Each command starts in the cgroup its spare was placed in, made while the one before
    // ran: one after another, commands take turns in two cgroups, never a new one.
    let mut seen = std::collections::BTreeSet::from([mine]);
    for _ in 0..4 {
        let next = run(&sandbox, sh("cat /proc/self/cgroup", ws.path())).await;
        let theirs = cgroups(&next);
        assert!(
            theirs
                .iter()
                .all(|l| l.ends_with("/c-0") || l.ends_with("/c-1")),
            "a new cgroup: {theirs:?}"
        );
        seen.insert(theirs);
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    // Two at once get two.
    let (a, b) = tokio::join!(
        run(
            &sandbox,
            sh(
                "cat /proc/self/cgroup; touch a.in; while [ ! -e b.in ]; do sleep 0.01; done",
                ws.path()
            )
        ),
        run(
            &sandbox,
            sh(
                "cat /proc/self/cgroup; touch b.in; while [ ! -e a.in ]; do sleep 0.01; done",
                ws.path()
            )
        ),
    );
    assert_ne!(
        cgroups(&a),
        cgroups(&b),
        "two running commands share a cgroup"
    );
}

#[tokio::test]
async fn a_dead_warm_sandbox_is_replaced_and_the_command_runs_once_on_the_new_one() {
    let ws = workspace();
    let sandbox = Sandbox::new(confined_policy());
    run(&sandbox, sh("true", ws.path())).await;
    let old = sandbox.warm_pid().await.unwrap();
    kill(old);
    // Once the helper has ended, its PID 1 has its parent-death SIGKILL pending and runs
    // nothing more.
    assert!(wait_gone(old as i32).await, "the helper {old} did not end");
    let out = run(&sandbox, sh("echo ran >> runs; cat runs", ws.path())).await;
    assert_eq!(out.stdout, "ran\n", "{out:?}");
    let new = sandbox.warm_pid().await.unwrap();
    assert_ne!(new, old);
}

#[tokio::test]
async fn a_warm_sandbox_dying_under_a_command_fails_it_without_running_it_again() {
    let ws = workspace();
    let sandbox = Sandbox::new(confined_policy());
    run(&sandbox, sh("true", ws.path())).await;
    let pid = sandbox.warm_pid().await.unwrap();
    let mut req = sh("echo ran >> runs; touch started; sleep 30", ws.path());
    req.timeout = Duration::from_secs(60);
    let killer = async {
        while !ws.path().join("started").exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        kill(pid);
    };
    let (result, ()) = tokio::join!(sandbox.run(req), killer);
    match result {
        Err(SandboxError::Io { source, .. }) => {
            assert!(
                source.to_string().contains("ended while the command ran"),
                "{source}"
            );
        }
        other => panic!("expected the run to fail: {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("runs")).unwrap(),
        "ran\n"
    );
    // The session goes on, on a new warm sandbox.
    let out = run(&sandbox, sh("cat runs", ws.path())).await;
    assert_eq!(out.stdout, "ran\n");
}

#[tokio::test]
async fn showing_other_folders_builds_another_warm_sandbox() {
    let ws = workspace();
    let shown = workspace();
    std::fs::write(shown.path().join("note"), "shown\n").unwrap();
    let sandbox = Sandbox::new(confined_policy());
    run(&sandbox, sh("true", ws.path())).await;
    let first = sandbox.warm_pid().await.unwrap();
    let note = shown.path().join("note");
    let mut req = sh(&format!("cat {}", note.display()), ws.path());
    req.read_only = vec![shown.path().to_path_buf()];
    let out = run(&sandbox, req).await;
    assert_eq!(out.stdout, "shown\n", "{out:?}");
    assert_ne!(sandbox.warm_pid().await.unwrap(), first);
}

#[tokio::test]
async fn a_sandbox_per_command_still_confines_when_warm_is_off() {
    let ws = workspace();
    let sandbox = Sandbox::new(SandboxPolicy {
        warm: false,
        ..confined_policy()
    });
    let out = run(
        &sandbox,
        sh("id -u; echo $PPID; touch /etc/reef-x", ws.path()),
    )
    .await;
    assert_eq!(out.stdout, "1000\n1\n", "{out:?}");
    assert!(out.stderr.contains("Read-only file system"), "{out:?}");
    assert_eq!(sandbox.warm_pid().await, None);
}

fn kill(pid: u32) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
}

#[tokio::test]
async fn programs_are_found_on_the_path_the_request_gives() {
    let ws = workspace();
    std::fs::create_dir(ws.path().join("bin")).unwrap();
    let tool = ws.path().join("bin/reef-tool");
    std::fs::write(&tool, "echo from the tool\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let sandbox = Sandbox::new(confined_policy());
    let mut req = ExecRequest::new(
        "reef-tool",
        vec![],
        ws.path().to_path_buf(),
        Duration::from_secs(30),
    );
    let path = format!("{}:/usr/bin:/bin", ws.path().join("bin").display());
    req.env.push(("PATH".into(), path));
    // A file without `#!` runs under /bin/sh, as a shell runs it.
    let out = run(&sandbox, req.clone()).await;
    assert_eq!(out.stdout, "from the tool\n", "{out:?}");
    req.program = "reef-no-such-tool".into();
    let out = run(&sandbox, req).await;
    assert_eq!(out.exit_code, Some(127), "{out:?}");
    assert!(
        out.stderr.contains("cannot execute reef-no-such-tool"),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_workspace_that_is_the_hosts_tmp_is_never_emptied() {
    let sandbox = Sandbox::new(confined_policy());
    let tmp = std::env::temp_dir();
    run(&sandbox, sh("true", &tmp)).await;
    // Made on the host while the session runs: not the sandbox's to remove.
    let kept = tempfile::NamedTempFile::new_in(&tmp).unwrap();
    let out = run(&sandbox, sh("true", &tmp)).await;
    assert!(out.success());
    assert!(
        kept.path().exists(),
        "the clean-up removed a file of the host's /tmp"
    );
}
