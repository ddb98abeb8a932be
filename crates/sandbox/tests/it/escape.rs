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

/// Runs `req` under `policy`; the sandbox itself failing to run is a test failure.
async fn run_with(policy: SandboxPolicy, req: ExecRequest) -> ExecOutput {
    let args = req.args.clone();
    Sandbox::new(policy)
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

// ---------------------------------------------------------------------------------------
// 1. Writing outside the workspace
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn write_outside_the_workspace_fails() {
    let fx = Fixture::new();
    // Observed: "sh: 1: cannot create …/outside/new.txt: Directory nonexistent" (exit 2).
    let out = fx.run(r#"echo x > "$OUTSIDE/new.txt""#).await;
    assert_fails_with(&out, "echo x > $OUTSIDE/new.txt", MISSING);
    assert!(
        !fx.outside.join("new.txt").exists(),
        "file appeared on the host"
    );
}

#[tokio::test]
async fn write_outside_via_a_symlink_fails() {
    let fx = Fixture::new();
    // Observed: "sh: 1: cannot create link/f: Directory nonexistent" (exit 2).
    let out = fx
        .run(r#"ln -s "$OUTSIDE" link || exit 99; echo x > link/f"#)
        .await;
    assert_ne!(out.exit_code, Some(99), "ln -s failed; {}", show(&out));
    assert_fails_with(&out, "echo x > link/f", MISSING);
    assert!(
        fx.ws.join("link").symlink_metadata().unwrap().is_symlink(),
        "the symlink was not created in the workspace"
    );
    assert!(!fx.outside.join("f").exists(), "file appeared on the host");
}

#[tokio::test]
async fn write_outside_via_a_hard_link_fails() {
    let fx = Fixture::new();
    // Observed: "ln: failed to access '…/outside/secret.txt': No such file or directory".
    let out = fx
        .run(r#"ln "$OUTSIDE/secret.txt" hl; status=$?; echo pwned >> hl; exit $status"#)
        .await;
    assert_fails_with(&out, "ln $OUTSIDE/secret.txt hl", MISSING);
    let secret = fx.outside.join("secret.txt");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), SECRET);
    if let Ok(hl) = std::fs::metadata(fx.ws.join("hl")) {
        assert_ne!(
            hl.ino(),
            std::fs::metadata(&secret).unwrap().ino(),
            "hl is a hard link to the outside file"
        );
    }
}

#[tokio::test]
async fn write_outside_via_dotdot_fails() {
    let fx = Fixture::new();
    // Observed: "sh: 1: cannot create ../outside/f: Directory nonexistent" (exit 2).
    let out = fx.run("echo x > ../outside/f").await;
    assert_fails_with(&out, "echo x > ../outside/f", MISSING);
    assert!(!fx.outside.join("f").exists(), "file appeared on the host");
}

#[tokio::test]
async fn write_outside_via_proc_self_root_fails() {
    let fx = Fixture::new();
    // Observed: "sh: 1: cannot create /proc/self/root…/outside/f: Directory nonexistent".
    let out = fx.run(r#"echo x > "/proc/self/root$OUTSIDE/f""#).await;
    assert_fails_with(&out, "echo x > /proc/self/root$OUTSIDE/f", MISSING);
    assert!(!fx.outside.join("f").exists(), "file appeared on the host");
}

#[tokio::test]
async fn move_a_file_in_from_outside_fails() {
    let fx = Fixture::new();
    // Observed: "mv: cannot stat '…/outside/secret.txt': No such file or directory".
    let out = fx.run(r#"mv "$OUTSIDE/secret.txt" ./stolen"#).await;
    assert_fails_with(&out, "mv $OUTSIDE/secret.txt ./stolen", MISSING);
    assert_eq!(
        std::fs::read_to_string(fx.outside.join("secret.txt")).unwrap(),
        SECRET,
        "the outside file was moved or changed"
    );
    assert!(!fx.ws.join("stolen").exists());
}

#[tokio::test]
async fn write_to_etc_and_usr_bin_is_read_only() {
    let fx = Fixture::new();
    for dir in ["/etc", "/usr/bin"] {
        let target = Path::new(dir).join(format!("reef-escape-{}", marker()));
        // Observed: "sh: 1: cannot create /etc/reef-escape-…: Read-only file system".
        let out = fx
            .run(&format!("echo x > {}", target.to_str().unwrap()))
            .await;
        let created = target.exists();
        if created {
            let _ = std::fs::remove_file(&target);
        }
        assert!(!created, "{} was created on the host", target.display());
        assert_fails_with(
            &out,
            &format!("echo x > {dir}/…"),
            &["Read-only file system"],
        );
    }
}

// ---------------------------------------------------------------------------------------
// 2. Reading the home directory
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn read_ssh_key_and_reef_config_fails() {
    let fx = Fixture::new();
    for file in [".ssh/id_rsa", ".reef/reef.toml"] {
        // Observed: "cat: …/home/.ssh/id_rsa: No such file or directory" (exit 1).
        let out = fx.run(&format!(r#"cat "$FAKE_HOME/{file}""#)).await;
        assert_fails_with(&out, &format!("cat $FAKE_HOME/{file}"), MISSING);
        assert!(
            !out.stdout.contains("reef-fake"),
            "secret leaked: {}",
            show(&out)
        );
    }
}

#[tokio::test]
async fn listing_root_home_shows_nothing() {
    let fx = Fixture::new();
    // Observed: "ls: cannot access '/root': No such file or directory" (exit 2).
    let out = fx.run("ls -A /root").await;
    assert_sandbox_built(&out, "ls -A /root");
    assert!(
        !out.success() || out.stdout.trim().is_empty(),
        "ls -A /root listed entries; {}",
        show(&out)
    );
}

#[tokio::test]
async fn read_real_home_fails() {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else {
        return;
    };
    let fx = Fixture::new();
    if home.join(".ssh").exists() {
        // Observed: (no ~/.ssh on the test machine)
        let out = fx.run(r#"ls -A "$REAL_HOME/.ssh""#).await;
        assert_fails_with(&out, "ls -A $REAL_HOME/.ssh", MISSING_OR_DENIED);
    }
    // Observed: "ls: cannot access '/root': No such file or directory" (HOME=/root).
    let out = fx.run(r#"ls -A "$REAL_HOME""#).await;
    assert_sandbox_built(&out, "ls -A $REAL_HOME");
    if out.success() {
        let host: Vec<String> = std::fs::read_dir(&home)
            .map(|d| {
                d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let seen: Vec<&str> = out
            .stdout
            .lines()
            .filter(|l| host.iter().any(|h| h == l))
            .collect();
        assert!(
            seen.is_empty(),
            "the real home {} is visible: {seen:?}",
            home.display()
        );
    }
}

// ---------------------------------------------------------------------------------------
// 3. + 4. Network
// ---------------------------------------------------------------------------------------

/// A `/dev/tcp` or `/dev/udp` write from bash inside the sandbox to 127.0.0.1:`port`.
fn bash_send(fx: &Fixture, proto: &str, port: u16) -> ExecRequest {
    let mut req = fx.req(&format!(
        r#"bash -c 'echo hi > /dev/{proto}/127.0.0.1/$PORT'"#
    ));
    req.env.push(("PORT".into(), port.to_string()));
    req
}

#[tokio::test]
async fn tcp_connect_in_none_mode_fails() {
    let fx = Fixture::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Observed: "bash: socket: Operation not permitted" (seccomp allows only AF_UNIX; exit 1).
    let out = run_with(confined_policy(), bash_send(&fx, "tcp", port)).await;
    assert_fails_with(&out, "echo > /dev/tcp/127.0.0.1/PORT", NET_BLOCKED);
    // A loopback connect completes in the kernel before connect() returns, so a connection
    // made by the finished command would be queued now.
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("the host listener received a connection from {peer}"),
        Err(e) => panic!("accept: {e}"),
    }
}

#[tokio::test]
async fn udp_send_in_none_mode_fails() {
    let fx = Fixture::new();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    // Observed: "bash: socket: Operation not permitted" (seccomp; exit 1).
    let out = run_with(confined_policy(), bash_send(&fx, "udp", port)).await;
    assert_fails_with(&out, "echo > /dev/udp/127.0.0.1/PORT", NET_BLOCKED);
    // Loopback delivery is synchronous: a datagram sent by the finished command is queued.
    socket.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    match socket.recv_from(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((n, peer)) => panic!("the host socket received {n} bytes from {peer}"),
        Err(e) => panic!("recv: {e}"),
    }
}

#[tokio::test]
async fn dns_and_outbound_connect_in_none_mode_fail() {
    let fx = Fixture::new();
    // Observed: exit 2 (not found), no output: no resolver is reachable.
    let out = fx.run("getent hosts example.com").await;
    assert_sandbox_built(&out, "getent hosts example.com");
    assert!(
        !out.success() && out.stdout.is_empty(),
        "getent resolved example.com; {}",
        show(&out)
    );
    // 192.0.2.1 is TEST-NET-1: a connect can only fail, but must fail at once, not time out.
    // Observed: "bash: socket: Operation not permitted" (seccomp; exit 1).
    let out = fx.run("bash -c 'echo > /dev/tcp/192.0.2.1/80'").await;
    assert!(!out.timed_out, "the connect was attempted; {}", show(&out));
    assert_fails_with(&out, "echo > /dev/tcp/192.0.2.1/80", NET_BLOCKED);
    // Observed: "PermissionError: [Errno 1] Operation not permitted" from socket(AF_INET).
    let out = fx
        .run(
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\
             .sendto(b\"x\", (\"1.1.1.1\", 53))'",
        )
        .await;
    assert_fails_with(&out, "python3 udp sendto 1.1.1.1:53", NET_BLOCKED);
}

#[tokio::test]
async fn tcp_connect_in_full_mode_reaches_the_listener() {
    // Positive control for `tcp_connect_in_none_mode_fails`: same command, network `full`.
    let fx = Fixture::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let policy = SandboxPolicy {
        network: NetworkMode::Full,
        ..confined_policy()
    };
    let out = run_with(policy, bash_send(&fx, "tcp", port)).await;
    assert_succeeds(&out, "echo hi > /dev/tcp/127.0.0.1/PORT in full mode");
    listener.set_nonblocking(true).unwrap();
    let (mut stream, _) = listener
        .accept()
        .unwrap_or_else(|e| panic!("no connection reached the listener ({e}); {}", show(&out)));
    stream.set_nonblocking(false).unwrap();
    let mut got = String::new();
    stream.read_to_string(&mut got).unwrap();
    assert_eq!(got, "hi\n");
}

// ---------------------------------------------------------------------------------------
// 5. + 6. Other processes
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn kill_a_host_process_fails() {
    let fx = Fixture::new();
    let mut target = HostSleep::start();
    let mut req = fx.req(r#"kill -9 "$TARGET""#);
    req.env.push(("TARGET".into(), target.pid().to_string()));
    // Observed: "/bin/sh: 1: kill: No such process" (exit 1): the pid does not exist in the
    // sandbox's PID namespace.
    let out = run_with(confined_policy(), req).await;
    assert_fails_with(&out, "kill -9 PID", &["No such process"]);
    target.assert_alive_and_untraced("kill -9 PID");

    // kill(-1) signals everything the caller may signal. Guarded: outside a new PID namespace
    // (where the shell's pid would not be tiny) it would hit the host's processes.
    // Observed: "/bin/sh: 2: kill: No such process", status 1 (nothing else to signal in the
    // namespace: kill(-1) spares PID 1 and the caller).
    let out = fx
        .run(
            r#"[ $$ -lt 10 ] || { echo "not in a new pid namespace (pid $$)" >&2; exit 99; }
               kill -9 -1; echo "kill -1 status $?""#,
        )
        .await;
    assert_sandbox_built(&out, "kill -9 -1");
    assert_ne!(out.exit_code, Some(99), "{}", show(&out));
    assert!(out.stdout.contains("kill -1 status"), "{}", show(&out));
    target.assert_alive_and_untraced("kill -9 -1");
}

#[tokio::test]
async fn ptrace_a_host_process_fails() {
    let fx = Fixture::new();
    let mut target = HostSleep::start();
    let ptrace = r#"python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, int(sys.argv[1]), 0, 0) != 0:  # PTRACE_ATTACH
    sys.exit("ptrace: " + os.strerror(ctypes.get_errno()))
print("attached")' "$TARGET""#;
    for (what, command) in [
        // Observed: "strace: attach: ptrace(PTRACE_ATTACH, PID): Operation not permitted"
        // (seccomp denies ptrace; without it the answer would be "No such process").
        ("strace -p PID", r#"strace -p "$TARGET" -e trace=none"#),
        // Observed: "ptrace: Operation not permitted" (seccomp).
        ("ptrace(PTRACE_ATTACH, PID)", ptrace),
    ] {
        let mut req = fx.req(command);
        req.env.push(("TARGET".into(), target.pid().to_string()));
        let out = run_with(confined_policy(), req).await;
        assert_fails_with(&out, what, &["No such process", "Operation not permitted"]);
        target.assert_alive_and_untraced(what);
    }
}

#[tokio::test]
async fn host_processes_are_invisible() {
    let fx = Fixture::new();
    let host = HostSleep::start();
    // Observed: 4 (PID 1 = the helper as init, the shell, ls and grep).
    let out = fx.run(r#"ls /proc | grep -cE '^[0-9]+$'"#).await;
    assert_succeeds(&out, "count /proc entries");
    let count: u32 = out.stdout.trim().parse().unwrap();
    assert!(count <= 5, "{count} processes visible; {}", show(&out));

    let out = fx
        .run("ps -eo pid=,args=; cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
        .await;
    assert_succeeds(&out, "ps -eo pid=,args=");
    assert!(
        !out.stdout.contains(&host.marker),
        "the host's `sleep {}` is visible; {}",
        host.marker,
        show(&out)
    );
    let own = std::process::id().to_string();
    assert!(
        !out.stdout
            .lines()
            .any(|l| l.split_whitespace().next() == Some(own.as_str())),
        "the test process {own} is visible; {}",
        show(&out)
    );
}

#[tokio::test]
async fn the_policy_is_not_visible_to_the_command() {
    let fx = Fixture::new();
    // PID 1's command line is world-readable; the policy (workspace path, hidden paths,
    // cgroups) travels in its environment, which the command neither inherits nor can read.
    let out = fx
        .run("tr '\\0' ' ' < /proc/1/cmdline; echo; env | grep -c REEF_SANDBOX_POLICY; cat /proc/1/environ")
        .await;
    assert_sandbox_built(&out, "read PID 1's command line");
    let mut lines = out.stdout.lines();
    let cmdline = lines.next().unwrap_or_default();
    assert!(cmdline.contains("--policy-env"), "{}", show(&out));
    assert!(
        !cmdline.contains("workspace"),
        "the policy leaks: {}",
        show(&out)
    );
    assert_eq!(
        lines.next(),
        Some("0"),
        "the command inherited the policy: {}",
        show(&out)
    );
    // Observed: "cat: /proc/1/environ: Permission denied".
    assert!(out.stderr.contains("Permission denied"), "{}", show(&out));
}

// ---------------------------------------------------------------------------------------
// 7. + 8. Privileges
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn mount_fails() {
    let fx = Fixture::new();
    // Observed: "mount: /tmp/m: must be superuser to use mount." (exit 32) — util-linux
    // refuses a non-root caller itself; the syscall below is the kernel's answer.
    let out = fx.run("mkdir -p /tmp/m && mount -t tmpfs x /tmp/m").await;
    assert_fails_with(
        &out,
        "mount -t tmpfs x /tmp/m",
        &[
            "must be superuser",
            "Operation not permitted",
            "ermission denied",
        ],
    );
    // Observed: "mount: Operation not permitted" (EPERM from mount(2)).
    let out = fx
        .run(
            r#"mkdir -p /tmp/m && python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.mount(b"x", b"/tmp/m", b"tmpfs", 0, None) != 0:
    sys.exit("mount: " + os.strerror(ctypes.get_errno()))
print("mounted")'"#,
        )
        .await;
    assert_fails_with(&out, "mount(2) tmpfs", &["Operation not permitted"]);
}

#[tokio::test]
async fn unshare_fails() {
    let fx = Fixture::new();
    // Observed: "unshare: unshare failed: Operation not permitted" (seccomp; exit 1).
    let out = fx.run("unshare -r true").await;
    assert_fails_with(&out, "unshare -r true", &["Operation not permitted"]);
}

#[tokio::test]
async fn setuid_binaries_do_not_raise_privileges() {
    let fx = Fixture::new();
    // Observed: su: "su: System error" (PAM cannot act as root; on a plain host a non-root
    // caller gets "su: Authentication failure"); passwd -S root: "passwd: You may not view or
    // modify password information for root." — uid 1000 before and after.
    let out = fx
        .run(
            "id -u; su -c id root; echo \"su exit $?\"; \
             passwd -S root; echo \"passwd exit $?\"; id -u",
        )
        .await;
    assert_sandbox_built(&out, "su / passwd");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"1000"), "{}", show(&out));
    assert_eq!(lines.last(), Some(&"1000"), "{}", show(&out));
    assert!(
        !out.stdout.contains("uid=0"),
        "su ran as root; {}",
        show(&out)
    );
    assert!(!out.stdout.contains("su exit 0"), "{}", show(&out));
    assert!(!out.stdout.contains("passwd exit 0"), "{}", show(&out));
    assert!(
        out.stderr.contains("su: Authentication failure")
            || out.stderr.contains("su: System error"),
        "su did not fail as expected; {}",
        show(&out)
    );
    assert!(
        out.stderr.contains("You may not view or modify"),
        "passwd did not fail as expected; {}",
        show(&out)
    );
}

// ---------------------------------------------------------------------------------------
// 9. – 11. Resource exhaustion
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn fork_bomb_is_contained() {
    let fx = Fixture::new();
    let mark = format!("reef-bomb-{}", marker());
    let policy = SandboxPolicy {
        limits: Limits {
            max_processes: Some(64),
            ..Limits::default()
        },
        ..confined_policy()
    };
    // Guarded: outside a new PID namespace the bomb would run on the host. The bomb's
    // processes carry `mark` as their $0; `exec sleep 5` keeps the run going while it rages.
    let mut req = fx.req(&format!(
        r#"[ $$ -lt 10 ] || {{ echo "not in a new pid namespace (pid $$)" >&2; exit 99; }}
           bash -c ':(){{ :|:& }};:' {mark}; exec sleep 5"#
    ));
    req.timeout = Duration::from_secs(10);
    // Observed: Ok, exit 0 after the 5 s sleep, stderr full of "environment: fork: retry:
    // Resource temporarily unavailable" (the pids limit bit); no bomb process left after.
    let result = Sandbox::new(policy).run(req).await;
    if let Ok(out) = &result {
        assert_sandbox_built(out, "fork bomb");
        assert_ne!(out.exit_code, Some(99), "{}", show(out));
        assert!(
            out.stderr.contains("Resource temporarily unavailable"),
            "the process limit never bit; {}",
            show(out)
        );
    }
    let left = wait_none_with(&mark).await;
    assert!(left.is_empty(), "bomb processes survived: {left:?}");
    let out = fx.run("true").await;
    assert_succeeds(&out, "true after the fork bomb");
}

#[tokio::test]
async fn memory_bomb_fails() {
    let fx = Fixture::new();
    let policy = SandboxPolicy {
        limits: Limits {
            memory_bytes: Some(256 * 1024 * 1024),
            ..Limits::default()
        },
        ..confined_policy()
    };
    // Observed: "MemoryError" in a traceback, exit 1 (RLIMIT_AS refuses the allocation).
    let out = run_with(policy, fx.req("python3 -c 'x = bytearray(4 * 1024**3)'")).await;
    assert_sandbox_built(&out, "bytearray(4 GiB)");
    assert!(!out.success(), "4 GiB allocated; {}", show(&out));
    assert!(
        out.stderr.contains("MemoryError")
            || out.stderr.contains("Cannot allocate memory")
            || out.exit_code == Some(128 + 9)
            || out.signal == Some(9),
        "expected MemoryError or an OOM kill; {}",
        show(&out)
    );
}

#[tokio::test]
async fn disk_filling_write_is_cut_at_the_file_size_limit() {
    let fx = Fixture::new();
    let limit = 10 * 1024 * 1024;
    let policy = SandboxPolicy {
        limits: Limits {
            file_size_bytes: Some(limit),
            ..Limits::default()
        },
        ..confined_policy()
    };
    // Observed: stderr "File size limit exceeded", head exit 153 (128 + SIGXFSZ).
    let out = run_with(
        policy,
        fx.req(r#"head -c 200000000 /dev/zero > big; echo "head exit $?""#),
    )
    .await;
    assert_sandbox_built(&out, "head -c 200000000 /dev/zero > big");
    assert_eq!(out.stdout, "head exit 153\n", "{}", show(&out));
    assert!(
        out.stderr.contains("File size limit exceeded"),
        "{}",
        show(&out)
    );
    let size = std::fs::metadata(fx.ws.join("big")).unwrap().len();
    assert!(size <= limit, "big is {size} bytes");
}

// ---------------------------------------------------------------------------------------
// 12. + 13. Outliving the run
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_process_ignoring_sigterm_is_killed_at_the_timeout() {
    let fx = Fixture::new();
    let arg = format!("100.{}", marker());
    let mut req = fx.req(&format!("trap '' TERM; sleep {arg}"));
    req.timeout = Duration::from_secs(1);
    // Observed: timed_out, signal 15 (the helper outside the PID namespace died on SIGTERM
    // and took the namespace with it); the SIGTERM-ignoring sleep is gone.
    let out = run_with(confined_policy(), req).await;
    assert_sandbox_built(&out, "trap '' TERM; sleep");
    assert!(out.timed_out, "not timed out; {}", show(&out));
    let left = wait_none_with(&arg).await;
    assert!(left.is_empty(), "`sleep {arg}` survived: {left:?}");
}

#[tokio::test]
async fn a_child_that_outlives_its_parent_is_killed() {
    let fx = Fixture::new();
    let (a, b) = (format!("100.{}", marker()), format!("100.{}", marker()));
    // One orphan in a session of its own (out of the process group), one re-parented by a
    // double fork; the command waits until both run, then exits at once.
    // Observed: exit 0, "started"; neither sleep remains. (With the plain backend the
    // `setsid` one survives: this case fails there.)
    let out = fx
        .run(&format!(
            "setsid sh -c 'touch a.ready; exec sleep {a}' &
             (sh -c 'touch b.ready; exec sleep {b}' &)
             while [ ! -e a.ready ] || [ ! -e b.ready ]; do sleep 0.01; done
             echo started"
        ))
        .await;
    assert_succeeds(&out, "setsid sleep & (sleep &)");
    assert_eq!(out.stdout, "started\n");
    for arg in [a, b] {
        let left = wait_none_with(&arg).await;
        assert!(left.is_empty(), "`sleep {arg}` survived: {left:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Positive controls
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn workspace_is_writable() {
    let fx = Fixture::new();
    let out = fx
        .run("echo hello > inside.txt && mkdir d && mv inside.txt d/moved.txt && cat d/moved.txt")
        .await;
    assert_succeeds(&out, "write in the workspace");
    assert_eq!(out.stdout, "hello\n");
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("d/moved.txt")).unwrap(),
        "hello\n"
    );
}

#[tokio::test]
async fn tmp_is_writable_and_private() {
    let fx = Fixture::new();
    let name = format!("reef-private-{}", marker());
    let out = fx
        .run(&format!("echo private > /tmp/{name} && cat /tmp/{name}"))
        .await;
    let host = Path::new("/tmp").join(&name);
    let leaked = host.exists();
    if leaked {
        let _ = std::fs::remove_file(&host);
    }
    assert_succeeds(&out, "write /tmp");
    assert_eq!(out.stdout, "private\n");
    assert!(!leaked, "{} appeared in the host's /tmp", host.display());
}

#[tokio::test]
async fn runs_as_uid_1000_without_capabilities() {
    let fx = Fixture::new();
    let out = fx
        .run("id -u; grep -E '^Cap(Prm|Eff|Amb):' /proc/self/status")
        .await;
    assert_succeeds(&out, "id -u");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"1000"), "{}", show(&out));
    for cap in ["CapPrm", "CapEff", "CapAmb"] {
        assert!(
            lines
                .iter()
                .any(|l| *l == format!("{cap}:\t0000000000000000")),
            "{cap} is not empty; {}",
            show(&out)
        );
    }
}

/// The helper checks of this file are themselves correct: a marker search finds a live
/// process (otherwise every "no process survived" assertion would pass vacuously).
#[tokio::test]
async fn marker_search_finds_a_live_process() {
    let host = HostSleep::start();
    assert_eq!(processes_with(&host.marker), vec![host.pid() as i32]);
}
