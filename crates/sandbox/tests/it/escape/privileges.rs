//! Escape suite, 7. + 8. Privileges.

use super::*;

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
