//! `Sandbox::terminal`: an interactive shell on a pseudo-terminal, confined like a run, with
//! job control, resizable, and gone with everything it started once it exits or is dropped.

use crate::support::{confined_policy, processes_with, wait_none_with};
use reef_sandbox::{ExecRequest, Sandbox, SandboxPolicy, TermSize, Terminal};
use std::time::Duration;

/// Tries to switch the terminal's line discipline (to N_HDLC) and to make it the console.
const IOCTLS: &str = r#"
import errno, fcntl, struct
for name, request in (("setd", 0x5423), ("cons", 0x541D)):
    try:
        fcntl.ioctl(0, request, struct.pack("i", 13))
        print(name + "=" + "allowed")
    except OSError as e:
        print(name + "=" + errno.errorcode[e.errno])
"#;

fn shell(dir: &std::path::Path) -> ExecRequest {
    let mut req = ExecRequest::new(
        "/bin/sh",
        vec!["-i".to_owned()],
        dir.to_path_buf(),
        Duration::from_secs(1),
    );
    req.env.push(("PS1".to_owned(), "reef$ ".to_owned()));
    req
}

/// A shell on an 80×24 terminal of a sandbox made from `policy` (the `Sandbox` value itself
/// is dropped at once), once it shows its prompt; with what it showed so far.
async fn at_prompt(policy: SandboxPolicy, dir: &std::path::Path) -> (Terminal, String) {
    let term = Sandbox::new(policy)
        .terminal(shell(dir), TermSize::new(80, 24))
        .await
        .unwrap();
    let mut seen = String::new();
    read_until(&term, &mut seen, "reef$ ").await;
    (term, seen)
}

/// Reads until `needle` appears in what the terminal showed (or it ends); returns all of it.
async fn read_until(term: &Terminal, seen: &mut String, needle: &str) {
    let mut buf = [0u8; 4096];
    while !seen.contains(needle) {
        let n = term.read(&mut buf).await.unwrap();
        assert!(n > 0, "the terminal ended before {needle:?}: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// Reads until the terminal ends; returns what it showed.
async fn read_to_end(term: &Terminal, seen: &mut String) {
    let mut buf = [0u8; 4096];
    loop {
        let n = term.read(&mut buf).await.unwrap();
        if n == 0 {
            return;
        }
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

#[tokio::test]
async fn a_confined_shell_has_a_terminal_job_control_and_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    let policy = SandboxPolicy {
        hidden: vec![outside.path().to_path_buf()],
        ..confined_policy()
    };
    std::fs::write(dir.path().join("ioctls.py"), IOCTLS).unwrap();
    let (mut term, mut seen) = at_prompt(policy, dir.path()).await;
    // A tty on every side, the size it was given, and job control (the shell's `$-` holds
    // `m` only when it could take the terminal for its session).
    // (Each answer is computed, so the echoed command line never matches it.)
    term.write_all(
        b"test -t 0 && test -t 1 && echo TTY-$((1+1)); stty size; case $- in *m*) echo JOBS-$((2+2));; esac; echo END-$((3+3))\n",
    )
    .await
    .unwrap();
    read_until(&term, &mut seen, "END-6").await;
    assert!(seen.contains("TTY-2"), "{seen}");
    assert!(seen.contains("24 80"), "{seen}");
    assert!(seen.contains("JOBS-4"), "{seen}");
    term.resize(TermSize::new(100, 40)).unwrap();
    term.write_all(b"stty size\n").await.unwrap();
    read_until(&term, &mut seen, "40 100").await;
    // Confined: what the policy hides stays hidden; a process left running dies with it.
    term.write_all(
        format!(
            "cat {}/secret; echo \"read=$?\"; sleep 300.125 &\n",
            outside.path().display()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    read_until(&term, &mut seen, "read=1").await;
    assert!(!seen.contains("s3cret"), "{seen}");
    assert!(wait_some_with("300.125").await, "{seen}");
    // Its terminal is only a terminal: no other line discipline, no console redirection.
    term.write_all(b"python3 ioctls.py\n").await.unwrap();
    read_until(&term, &mut seen, "cons=").await;
    assert!(seen.contains("setd=EPERM"), "{seen}");
    read_until(&term, &mut seen, "cons=EPERM").await;
    term.write_all(b"exit 3\n").await.unwrap();
    read_to_end(&term, &mut seen).await;
    let status = term.wait().await.unwrap();
    assert_eq!(status.code(), Some(3), "{seen}");
    assert_eq!(wait_none_with("300.125").await, Vec::<i32>::new());
}

#[tokio::test]
async fn the_none_backend_offers_no_terminal() {
    // Unconfined, it would be a shell on the host: refused, and nothing is started.
    let dir = tempfile::tempdir().unwrap();
    let err = Sandbox::new(SandboxPolicy::default())
        .terminal(shell(dir.path()), TermSize::new(80, 24))
        .await
        .unwrap_err();
    assert!(
        matches!(err, reef_sandbox::SandboxError::Unsupported(_)),
        "{err:?}"
    );
    assert!(err.to_string().contains("shell on the host"), "{err}");
}

#[tokio::test]
async fn dropping_a_terminal_kills_what_runs_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let (term, seen) = at_prompt(confined_policy(), dir.path()).await;
    term.write_all(b"sleep 301.125\n").await.unwrap();
    assert!(wait_some_with("301.125").await, "{seen}");
    drop(term);
    assert_eq!(wait_none_with("301.125").await, Vec::<i32>::new());
}

/// Polls until some host process has `marker` in its command line, for at most 10 s.
async fn wait_some_with(marker: &str) -> bool {
    for _ in 0..200 {
        if !processes_with(marker).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_terminal_keeps_its_session_after_the_sandbox_value_is_dropped() {
    // The helper joins the session's cgroups after it starts; they must still exist then.
    let dir = tempfile::tempdir().unwrap();
    let (_term, seen) = at_prompt(confined_policy(), dir.path()).await;
    assert!(!seen.contains("reef-sandbox:"), "{seen}");
}
