//! Every file tool against symbolic links the agent planted pointing outside the workspace:
//! refused, and nothing outside is read or written.

use crate::support::{Env, denied, env};
use serde_json::json;
use std::path::PathBuf;

const SECRET: &str = "api-token-7f3a9c";

/// A workspace with `token -> <outside>/secret.txt` and `out -> <outside>`.
struct Trap {
    env: Env,
    outside: tempfile::TempDir,
}

impl Trap {
    fn new() -> Self {
        let env = env();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), SECRET).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), env.root().join("token"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), env.root().join("out")).unwrap();
        env.write("plain.txt", "plain text\n");
        // Positive control: both links really lead to the secret.
        assert_eq!(
            std::fs::read_to_string(env.root().join("token")).unwrap(),
            SECRET
        );
        assert_eq!(
            std::fs::read_to_string(env.root().join("out/secret.txt")).unwrap(),
            SECRET
        );
        Self { env, outside }
    }

    fn secret_path(&self) -> PathBuf {
        self.outside.path().join("secret.txt")
    }

    /// The outside directory holds the unchanged secret and nothing else.
    fn assert_untouched(&self) {
        let names: Vec<_> = std::fs::read_dir(self.outside.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["secret.txt"]);
        assert_eq!(std::fs::read_to_string(self.secret_path()).unwrap(), SECRET);
    }

    async fn refused(&self, tool: &str, args: serde_json::Value) {
        let msg = denied(self.env.call(tool, args.clone()).await);
        assert!(msg.contains("symbolic link"), "{tool} {args}: {msg}");
        assert!(msg.contains("shell"), "{tool} {args}: {msg}");
        assert!(!msg.contains(SECRET), "{tool} {args}: {msg}");
    }
}

#[tokio::test]
async fn read_file_refuses_links_out() {
    let t = Trap::new();
    assert_eq!(
        t.env.ok("read_file", json!({"path": "plain.txt"})).await,
        "plain text\n"
    );
    t.refused("read_file", json!({"path": "token"})).await;
    t.refused("read_file", json!({"path": "out/secret.txt"}))
        .await;
    let abs = t.env.root().join("token");
    t.refused("read_file", json!({"path": abs.to_str().unwrap()}))
        .await;
    t.assert_untouched();
}

#[tokio::test]
async fn write_file_refuses_links_out_and_writes_nothing_there() {
    let t = Trap::new();
    t.env
        .ok(
            "write_file",
            json!({"path": "new/dir/f.txt", "content": "ok"}),
        )
        .await;
    assert_eq!(t.env.read("new/dir/f.txt"), "ok");
    t.refused("write_file", json!({"path": "token", "content": "pwned"}))
        .await;
    t.refused(
        "write_file",
        json!({"path": "out/new.txt", "content": "pwned"}),
    )
    .await;
    t.refused(
        "write_file",
        json!({"path": "out/sub/new.txt", "content": "pwned"}),
    )
    .await;
    t.assert_untouched();
}

#[tokio::test]
async fn edit_file_refuses_links_out_and_changes_nothing_there() {
    let t = Trap::new();
    let out = t
        .env
        .ok(
            "edit_file",
            json!({"path": "plain.txt", "old_string": "plain", "new_string": "edited"}),
        )
        .await;
    assert_eq!(out, "replaced 1 occurrence in plain.txt");
    let edit = |path: &str| json!({"path": path, "old_string": "api", "new_string": "pwned"});
    t.refused("edit_file", edit("token")).await;
    t.refused("edit_file", edit("out/secret.txt")).await;
    t.assert_untouched();
}

#[tokio::test]
async fn list_dir_shows_links_without_following_them() {
    let t = Trap::new();
    let out = t.env.ok("list_dir", json!({})).await;
    assert_eq!(
        out,
        "out -> (symbolic link, not followed)\nplain.txt (11 bytes)\n\
         token -> (symbolic link, not followed)\n"
    );
    let out = t.env.ok("list_dir", json!({"recursive": true})).await;
    assert!(!out.contains("secret.txt"), "{out}");
    t.refused("list_dir", json!({"path": "out"})).await;
    t.refused("list_dir", json!({"path": "out", "recursive": true}))
        .await;
}

#[tokio::test]
async fn search_files_does_not_read_through_links() {
    let t = Trap::new();
    let out = t.env.ok("search_files", json!({"pattern": "plain"})).await;
    assert_eq!(out, "plain.txt:1: plain text\n");
    let out = t
        .env
        .ok("search_files", json!({"pattern": "api-token"}))
        .await;
    assert!(out.starts_with("no matches"), "{out}");
    t.refused("search_files", json!({"pattern": "api", "path": "token"}))
        .await;
    t.refused("search_files", json!({"pattern": "api", "path": "out"}))
        .await;
}

#[tokio::test]
async fn shell_refuses_a_linked_cwd() {
    let t = Trap::new();
    t.refused("shell", json!({"command": "cat secret.txt", "cwd": "out"}))
        .await;
    t.assert_untouched();
}
