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

/// A file only root may read (`0600`, owned by root) where the view shows it, removed on drop.
struct RootOnlyFile(PathBuf);

impl Drop for RootOnlyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tokio::test]
async fn a_root_only_file_of_the_host_is_unreadable_when_reef_runs_as_root() {
    if !nix::unistd::geteuid().is_root() {
        // Run as any other user, the command is that user, and reads what the user may.
        eprintln!("skipped: reef does not run as root here");
        return;
    }
    use std::os::unix::fs::PermissionsExt as _;
    let fx = Fixture::new();
    // In /etc, which every sandbox shows read-only.
    let secret = RootOnlyFile(PathBuf::from(format!(
        "/etc/reef-escape-root-only-{}",
        std::process::id()
    )));
    std::fs::write(&secret.0, SECRET).unwrap();
    std::fs::set_permissions(&secret.0, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Observed: "cat: /etc/reef-escape-root-only-N: Permission denied" (exit 1).
    let out = fx.run(&format!("cat {}", secret.0.display())).await;
    assert_fails_with(&out, "cat a root-only file", &["Permission denied"]);
    assert!(!out.stdout.contains(SECRET.trim()), "{}", show(&out));
    // The host's own (0640 root:shadow on Debian) shows nothing either: masked, or refused.
    let out = fx.run("cat /etc/shadow").await;
    assert!(!out.stdout.contains("root:"), "{}", show(&out));
    // Yet the workspace is the command's to write, and what it writes is root's on the host.
    let out = fx
        .run("echo made > made.txt && id -u && stat -c %u made.txt")
        .await;
    assert_eq!(out.exit_code, Some(0), "{}", show(&out));
    assert_eq!(out.stdout, "1000\n1000\n", "{}", show(&out));
    let made = std::fs::metadata(fx.ws.join("made.txt")).unwrap();
    assert_eq!(made.uid(), 0, "written as root on the host");
    assert_eq!(
        std::fs::read_to_string(fx.ws.join("made.txt")).unwrap(),
        "made\n"
    );
}

#[tokio::test]
async fn no_setuid_or_setgid_file_can_be_made() {
    let fx = Fixture::new();
    // Observed: "chmod: changing permissions of 'f': Operation not permitted" (seccomp).
    let out = fx.run("touch f && chmod 4755 f").await;
    assert_fails_with(&out, "chmod 4755", &["Operation not permitted"]);
    let out = fx.run("chmod g+s f").await;
    assert_fails_with(&out, "chmod g+s", &["Operation not permitted"]);
    let out = fx
        .run(
            r#"python3 -c '
import os
os.open("made", os.O_CREAT | os.O_WRONLY, 0o6755)'"#,
        )
        .await;
    assert_fails_with(&out, "open(O_CREAT, 06755)", &["Operation not permitted"]);
    for name in ["f", "made"] {
        if let Ok(meta) = std::fs::metadata(fx.ws.join(name)) {
            assert_eq!(meta.mode() & 0o6000, 0, "{name} has a set-id bit");
        }
    }
    // Ordinary modes still change.
    let out = fx.run("chmod 700 f && stat -c %a f").await;
    assert_eq!(out.exit_code, Some(0), "{}", show(&out));
    assert_eq!(out.stdout, "700\n");
}
