//! Escape suite, 5. + 6. Other processes.

use super::*;

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
