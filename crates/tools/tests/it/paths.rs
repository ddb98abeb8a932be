//! Workspace confinement of file paths.

use crate::support::{denied, env};
use serde_json::json;

#[tokio::test]
async fn dotdot_escape_is_denied() {
    let env = env();
    for path in ["../outside.txt", "a/../../outside.txt", "./../x"] {
        let msg = denied(env.call("read_file", json!({"path": path})).await);
        assert!(
            msg.contains(&format!("path {path} is outside the workspace")),
            "{msg}"
        );
        assert!(msg.contains(env.root().to_str().unwrap()), "{msg}");
    }
    let msg = denied(
        env.call("write_file", json!({"path": "../evil.txt", "content": "x"}))
            .await,
    );
    assert!(msg.contains("outside the workspace"), "{msg}");
    assert!(!env.root().parent().unwrap().join("evil.txt").exists());
}

#[tokio::test]
async fn dotdot_that_stays_inside_is_fine() {
    let env = env();
    env.write("a/f.txt", "ok");
    let out = env.ok("read_file", json!({"path": "a/../a/./f.txt"})).await;
    assert_eq!(out, "ok");
}

#[tokio::test]
async fn absolute_paths_only_inside_the_workspace() {
    let env = env();
    env.write("f.txt", "inside");
    let abs = env.root().join("f.txt");
    let out = env
        .ok("read_file", json!({"path": abs.to_str().unwrap()}))
        .await;
    assert_eq!(out, "inside");
    let msg = denied(env.call("read_file", json!({"path": "/etc/passwd"})).await);
    assert!(msg.contains("/etc/passwd"), "{msg}");
}

#[tokio::test]
async fn symlink_to_etc_is_denied() {
    let env = env();
    std::os::unix::fs::symlink("/etc", env.root().join("etc")).unwrap();
    // Positive control: the link does lead somewhere readable.
    assert!(env.root().join("etc/passwd").exists());
    let msg = denied(env.call("read_file", json!({"path": "etc/passwd"})).await);
    assert!(msg.contains("symbolic link etc"), "{msg}");
    assert!(!msg.contains("root:"), "{msg}");
    let msg = denied(
        env.call(
            "write_file",
            json!({"path": "etc/reef-evil", "content": "x"}),
        )
        .await,
    );
    assert!(msg.contains("symbolic link etc"), "{msg}");
    assert!(!std::path::Path::new("/etc/reef-evil").exists());
    let msg = denied(env.call("list_dir", json!({"path": "etc"})).await);
    assert!(msg.contains("symbolic link etc"), "{msg}");
}

#[tokio::test]
async fn dangling_symlink_is_denied() {
    let env = env();
    let target = env.root().parent().unwrap().join("reef-dangling-target");
    std::os::unix::fs::symlink(&target, env.root().join("link")).unwrap();
    let msg = denied(
        env.call("write_file", json!({"path": "link", "content": "x"}))
            .await,
    );
    assert!(msg.contains("link"), "{msg}");
    assert!(!target.exists());
}

#[tokio::test]
async fn symlink_inside_the_workspace_is_not_followed_either() {
    // A link is refused wherever it points: the tools never resolve one, so no check can be
    // raced. The message points the model at the real path or at the sandboxed shell.
    let env = env();
    env.write("real/f.txt", "via link");
    std::os::unix::fs::symlink(env.root().join("real"), env.root().join("alias")).unwrap();
    let msg = denied(env.call("read_file", json!({"path": "alias/f.txt"})).await);
    assert!(
        msg.contains("goes through the symbolic link alias"),
        "{msg}"
    );
    assert!(
        msg.contains("File tools do not follow symbolic links"),
        "{msg}"
    );
    assert!(msg.contains("shell"), "{msg}");
    let out = env.ok("read_file", json!({"path": "real/f.txt"})).await;
    assert_eq!(out, "via link");
}
