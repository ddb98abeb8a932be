//! Escape suite, 1. Writing outside the workspace.

use super::*;

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
