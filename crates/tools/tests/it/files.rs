//! `read_file`, `write_file` and `edit_file`.

use crate::support::{env, env_with, failed, invalid};
use reef_tools::BuiltinConfig;
use serde_json::json;

#[tokio::test]
async fn write_creates_parents_and_read_returns_the_text() {
    let env = env();
    let out = env
        .ok(
            "write_file",
            json!({"path": "a/b/c.txt", "content": "hello"}),
        )
        .await;
    assert_eq!(out, "wrote 5 bytes to a/b/c.txt");
    assert_eq!(env.read("a/b/c.txt"), "hello");
    let text = env.ok("read_file", json!({"path": "a/b/c.txt"})).await;
    assert_eq!(text, "hello");
}

#[tokio::test]
async fn write_refuses_a_directory() {
    let env = env();
    std::fs::create_dir(env.root().join("d")).unwrap();
    let msg = failed(
        env.call("write_file", json!({"path": "d", "content": "x"}))
            .await,
    );
    assert!(msg.contains("is a directory"), "{msg}");
}

#[tokio::test]
async fn read_a_line_range_with_header() {
    let env = env();
    env.write("f.txt", "one\ntwo\nthree\nfour\nfive\n");
    let out = env
        .ok(
            "read_file",
            json!({"path": "f.txt", "start_line": 2, "end_line": 3}),
        )
        .await;
    assert_eq!(out, "f.txt (lines 2-3 of 5)\ntwo\nthree\n");
    let out = env
        .ok("read_file", json!({"path": "f.txt", "start_line": 4}))
        .await;
    assert_eq!(out, "f.txt (lines 4-5 of 5)\nfour\nfive\n");
    let out = env
        .ok("read_file", json!({"path": "f.txt", "end_line": 99}))
        .await;
    assert!(out.starts_with("f.txt (lines 1-5 of 5)\n"), "{out}");
}

#[tokio::test]
async fn read_rejects_bad_ranges() {
    let env = env();
    env.write("f.txt", "one\ntwo\n");
    let msg = invalid(
        env.call("read_file", json!({"path": "f.txt", "start_line": 9}))
            .await,
    );
    assert!(msg.contains("past the end"), "{msg}");
    let msg = invalid(
        env.call("read_file", json!({"path": "f.txt", "start_line": 0}))
            .await,
    );
    assert!(msg.contains("at least 1"), "{msg}");
    let msg = invalid(
        env.call(
            "read_file",
            json!({"path": "f.txt", "start_line": 2, "end_line": 1}),
        )
        .await,
    );
    assert!(msg.contains("before start_line"), "{msg}");
}

#[tokio::test]
async fn read_refuses_binary_large_missing_and_directories() {
    let env = env_with(BuiltinConfig {
        max_read_bytes: 100,
        ..BuiltinConfig::default()
    });
    std::fs::write(env.root().join("bin"), b"abc\0def").unwrap();
    let msg = failed(env.call("read_file", json!({"path": "bin"})).await);
    assert!(msg.contains("binary"), "{msg}");

    env.write("big.txt", &"x".repeat(101));
    let msg = failed(env.call("read_file", json!({"path": "big.txt"})).await);
    assert!(msg.contains("101 bytes"), "{msg}");
    assert!(msg.contains("100-byte"), "{msg}");

    let msg = failed(env.call("read_file", json!({"path": "missing.txt"})).await);
    assert!(msg.contains("missing.txt"), "{msg}");

    std::fs::create_dir(env.root().join("dir")).unwrap();
    let msg = failed(env.call("read_file", json!({"path": "dir"})).await);
    assert!(msg.contains("list_dir"), "{msg}");
}

#[tokio::test]
async fn read_file_rejects_unknown_and_mistyped_fields() {
    let env = env();
    let msg = invalid(env.call("read_file", json!({"file": "x"})).await);
    assert!(msg.contains("file"), "{msg}");
    let msg = invalid(
        env.call("read_file", json!({"path": "x", "start_line": "two"}))
            .await,
    );
    assert!(msg.contains("start_line"), "{msg}");
}

#[tokio::test]
async fn edit_replaces_a_unique_string() {
    let env = env();
    env.write("f.rs", "fn main() {\n    old();\n}\n");
    let out = env
        .ok(
            "edit_file",
            json!({"path": "f.rs", "old_string": "old()", "new_string": "new()"}),
        )
        .await;
    assert_eq!(out, "replaced 1 occurrence in f.rs");
    assert_eq!(env.read("f.rs"), "fn main() {\n    new();\n}\n");
}

#[tokio::test]
async fn edit_reports_absent_string() {
    let env = env();
    env.write("f.txt", "abc");
    let msg = failed(
        env.call(
            "edit_file",
            json!({"path": "f.txt", "old_string": "zzz", "new_string": "y"}),
        )
        .await,
    );
    assert_eq!(msg, "old_string not found in f.txt");
}

#[tokio::test]
async fn edit_refuses_ambiguous_string_unless_replace_all() {
    let env = env();
    env.write("f.txt", "a x b x c");
    let msg = failed(
        env.call(
            "edit_file",
            json!({"path": "f.txt", "old_string": "x", "new_string": "y"}),
        )
        .await,
    );
    assert!(msg.contains("occurs 2 times"), "{msg}");
    assert!(msg.contains("replace_all"), "{msg}");
    assert_eq!(env.read("f.txt"), "a x b x c");

    let out = env
        .ok(
            "edit_file",
            json!({"path": "f.txt", "old_string": "x", "new_string": "y", "replace_all": true}),
        )
        .await;
    assert_eq!(out, "replaced 2 occurrences in f.txt");
    assert_eq!(env.read("f.txt"), "a y b y c");
}

#[tokio::test]
async fn edit_rejects_empty_old_string() {
    let env = env();
    env.write("f.txt", "abc");
    let msg = invalid(
        env.call(
            "edit_file",
            json!({"path": "f.txt", "old_string": "", "new_string": "y"}),
        )
        .await,
    );
    assert!(msg.contains("old_string"), "{msg}");
}

fn mkfifo(env: &crate::support::Env, rel: &str) {
    let status = std::process::Command::new("mkfifo")
        .arg(env.root().join(rel))
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn file_tools_refuse_a_fifo_instead_of_hanging() {
    // A model can create a FIFO with the shell tool; opening it would block forever.
    let env = env();
    mkfifo(&env, "pipe");
    let calls = [
        ("read_file", json!({"path": "pipe"})),
        (
            "edit_file",
            json!({"path": "pipe", "old_string": "a", "new_string": "b"}),
        ),
        ("write_file", json!({"path": "pipe", "content": "x"})),
    ];
    for (tool, args) in calls {
        let res = tokio::time::timeout(std::time::Duration::from_secs(5), env.call(tool, args))
            .await
            .unwrap_or_else(|_| panic!("{tool} hung on a FIFO"));
        let msg = failed(res);
        assert!(msg.contains("not a regular file"), "{tool}: {msg}");
    }
}

#[tokio::test]
async fn edit_refuses_files_over_the_read_limit() {
    let env = env_with(BuiltinConfig {
        max_read_bytes: 100,
        ..BuiltinConfig::default()
    });
    env.write("big.txt", &"a".repeat(500));
    let msg = failed(
        env.call(
            "edit_file",
            json!({"path": "big.txt", "old_string": "a", "new_string": "b", "replace_all": true}),
        )
        .await,
    );
    assert!(msg.contains("over the 100-byte"), "{msg}");
    assert_eq!(env.read("big.txt"), "a".repeat(500));
}
