//! The escape suite: real attempts to get out of the `landlock` backend, each of which must
//! fail with the error the sandbox is expected to produce, plus positive controls proving
//! the same commands work where they are allowed (so the suite can fail).
//!
//! Layout of every case: a tempdir holding `ws/` (the workspace, the command's cwd),
//! `outside/secret.txt` (a host file next to the workspace) and `home/` (a fake home with
//! `.ssh/id_rsa` and `.reef/reef.toml`). Their paths reach the command as `$OUTSIDE` and
//! `$FAKE_HOME`; the real home as `$REAL_HOME`. The comment on each case records the error
//! the sandbox produced when the suite was last run.

use crate::support::{confined_policy, processes_with, sh, wait_none_with};
use reef_sandbox::{ExecOutput, ExecRequest, Limits, NetworkMode, Sandbox, SandboxPolicy};
use std::io::{ErrorKind, Read};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tempfile::TempDir;

const SECRET: &str = "reef-escape-secret-7f3a\n";
const FAKE_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- reef-fake-key-91c2\n";
const FAKE_CONFIG: &str = "api_key = \"reef-fake-config-55d0\"\n";

/// Errors meaning "that path is not there": the host path is not mounted in the sandbox.
/// dash words ENOENT on `>` as "Directory nonexistent" / "nonexistent directory".
const MISSING: &[&str] = &["No such file or directory", "nonexistent"];
/// A host path that may be masked rather than absent: invisible or unreadable/unwritable.
const MISSING_OR_DENIED: &[&str] = &[
    "No such file or directory",
    "nonexistent",
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
];
/// What a TCP/UDP attempt may fail with in `none` mode: seccomp refuses non-unix sockets
/// (EPERM); an empty namespace has no route (ENETUNREACH) and nothing listening (ECONNREFUSED);
/// Landlock refuses TCP connect (EACCES).
const NET_BLOCKED: &[&str] = &[
    "Operation not permitted",
    "Network is unreachable",
    "Connection refused",
    "Permission denied",
    "Address family not supported",
];

/// The workspace, an outside dir and a fake home in one tempdir (removed on drop).
struct Fixture {
    _root: TempDir,
    ws: PathBuf,
    outside: PathBuf,
    fake_home: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        let outside = root.path().join("outside");
        let fake_home = root.path().join("home");
        std::fs::create_dir(&ws).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        std::fs::create_dir_all(fake_home.join(".ssh")).unwrap();
        std::fs::create_dir_all(fake_home.join(".reef")).unwrap();
        std::fs::write(fake_home.join(".ssh/id_rsa"), FAKE_KEY).unwrap();
        std::fs::write(fake_home.join(".reef/reef.toml"), FAKE_CONFIG).unwrap();
        Self {
            _root: root,
            ws,
            outside,
            fake_home,
        }
    }

    /// `/bin/sh -c command` in the workspace, with `$OUTSIDE`, `$FAKE_HOME`, `$REAL_HOME` set.
    fn req(&self, command: &str) -> ExecRequest {
        let mut req = sh(command, &self.ws);
        let path = |p: &Path| p.to_str().unwrap().to_owned();
        req.env.push(("OUTSIDE".into(), path(&self.outside)));
        req.env.push(("FAKE_HOME".into(), path(&self.fake_home)));
        if let Some(home) = std::env::var_os("HOME") {
            req.env
                .push(("REAL_HOME".into(), home.to_string_lossy().into_owned()));
        }
        req
    }

    /// Runs `command` under the default confined policy.
    async fn run(&self, command: &str) -> ExecOutput {
        run_with(confined_policy(), self.req(command)).await
    }
}

/// Runs `req` under `policy`; the sandbox itself failing to run is a test failure. With the
/// default (warm) policy the case runs as the session's second command, forked from a warm
/// sandbox that has already run and cleaned up after a first one.
async fn run_with(policy: SandboxPolicy, req: ExecRequest) -> ExecOutput {
    let args = req.args.clone();
    let sandbox = Sandbox::new(policy);
    if sandbox.policy().warm {
        let mut first = req.clone();
        first.program = "true".into();
        first.args.clear();
        first.stdin = None;
        first.cwd = PathBuf::new();
        let out = sandbox.run(first).await.unwrap();
        assert_sandbox_built(&out, "the warm sandbox's first command");
    }
    sandbox
        .run(req)
        .await
        .unwrap_or_else(|e| panic!("the sandbox could not run {args:?}: {e}"))
}

/// A unique marker (per test process and call) to find a run's processes on the host.
fn marker() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    format!(
        "{}{:06}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn show(out: &ExecOutput) -> String {
    format!(
        "exit {:?}, signal {:?}, timed_out {}, stdout {:?}, stderr {:?}",
        out.exit_code, out.signal, out.timed_out, out.stdout, out.stderr
    )
}

/// The command ran inside a built sandbox: the helper reported no setup failure (a setup
/// failure would make every negative case pass for the wrong reason).
#[track_caller]
fn assert_sandbox_built(out: &ExecOutput, what: &str) {
    assert!(
        out.exit_code != Some(125) && !out.stderr.contains("reef-sandbox:"),
        "{what}: the sandbox was not built; {}",
        show(out)
    );
}

/// `what` failed inside the sandbox with an error containing one of `expected`.
#[track_caller]
fn assert_fails_with(out: &ExecOutput, what: &str, expected: &[&str]) {
    assert_sandbox_built(out, what);
    assert!(
        !out.success(),
        "{what}: succeeded inside the sandbox; {}",
        show(out)
    );
    assert!(
        expected.iter().any(|e| out.stderr.contains(e)),
        "{what}: expected an error containing one of {expected:?}; {}",
        show(out)
    );
}

#[track_caller]
fn assert_succeeds(out: &ExecOutput, what: &str) {
    assert_sandbox_built(out, what);
    assert!(out.success(), "{what}: failed; {}", show(out));
}

/// A host process started by the test, killed when dropped (also on panic).
struct HostSleep {
    child: Child,
    marker: String,
}

impl HostSleep {
    fn start() -> Self {
        let marker = format!("60.{}", marker());
        let child = Command::new("sleep")
            .arg(&marker)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        // `spawn` returns once exec has begun, but /proc/PID/cmdline shows the new arguments
        // only a moment later: wait for them, so the marker is findable on the host.
        for _ in 0..1000 {
            if processes_with(&marker).contains(&(child.id() as i32)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Self { child, marker }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    #[track_caller]
    fn assert_alive_and_untraced(&mut self, what: &str) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "{what}: the host process {} died",
            self.pid()
        );
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        assert!(
            status.lines().any(|l| l == "TracerPid:\t0"),
            "{what}: the host process {} is traced:\n{status}",
            self.pid()
        );
    }
}

impl Drop for HostSleep {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

mod allowlist;
mod controls;
mod exhaustion;
mod files;
mod home;
mod layers;
mod lifetime;
mod network;
mod privileges;
mod processes;
