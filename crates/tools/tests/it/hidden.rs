//! Paths the sandbox hides (credentials) are refused by the file tools too.

use crate::support::{denied, env, env_hiding};
use reef_tools::BuiltinConfig;
use serde_json::json;

const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- hunter2";

#[tokio::test]
async fn file_tools_refuse_or_skip_what_the_sandbox_hides() {
    let env = env_hiding(BuiltinConfig::default(), &[".ssh", "secrets"]);
    env.write(".ssh/id_rsa", KEY);
    env.write("secrets/key.pem", KEY);
    env.write("notes.txt", "not secret\n");

    let hidden = |msg: String| {
        assert!(msg.contains("hidden from agents"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
    };
    hidden(denied(
        env.call("read_file", json!({"path": ".ssh/id_rsa"})).await,
    ));
    hidden(denied(
        env.call("read_file", json!({"path": "secrets/key.pem"}))
            .await,
    ));
    hidden(denied(env.call("list_dir", json!({"path": ".ssh"})).await));
    hidden(denied(
        env.call("write_file", json!({"path": ".ssh/x", "content": "x"}))
            .await,
    ));
    assert!(!env.root().join(".ssh/x").exists());
    hidden(denied(
        env.call(
            "edit_file",
            json!({"path": ".ssh/id_rsa", "old_string": "hunter2", "new_string": "x"}),
        )
        .await,
    ));
    assert_eq!(env.read(".ssh/id_rsa"), KEY);
    hidden(denied(
        env.call(
            "search_files",
            json!({"pattern": "hunter2", "path": "secrets"}),
        )
        .await,
    ));

    // Listings and searches leave hidden paths out without a word.
    let out = env.ok("list_dir", json!({})).await;
    assert_eq!(out, "notes.txt (11 bytes)\n");
    let out = env.ok("list_dir", json!({"recursive": true})).await;
    assert_eq!(out, "notes.txt (11 bytes)\n");
    let out = env.ok("search_files", json!({"pattern": "hunter2"})).await;
    assert!(out.starts_with("no matches"), "{out}");
    let out = env.ok("search_files", json!({"pattern": "secret"})).await;
    assert_eq!(out, "notes.txt:1: not secret\n");
}

#[tokio::test]
async fn the_same_files_are_ordinary_without_the_policy() {
    // Positive control for the test above: only the policy makes them hidden.
    let env = env();
    env.write(".ssh/id_rsa", KEY);
    env.write("secrets/key.pem", KEY);
    assert_eq!(
        env.ok("read_file", json!({"path": ".ssh/id_rsa"})).await,
        KEY
    );
    let out = env.ok("search_files", json!({"pattern": "hunter2"})).await;
    assert!(out.starts_with("secrets/key.pem:1:"), "{out}");
    let out = env.ok("list_dir", json!({"recursive": true})).await;
    assert!(out.contains(".ssh/id_rsa"), "{out}");
}
