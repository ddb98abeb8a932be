//! The `shell` tool.

use crate::support::{denied, env, env_with, failed, invalid};
use reef_tools::BuiltinConfig;
use serde_json::json;

#[tokio::test]
async fn runs_a_command_in_the_workspace() {
    let env = env();
    env.write("hello.txt", "hi there\n");
    let out = env.ok("shell", json!({"command": "cat hello.txt"})).await;
    assert!(out.starts_with("exit_code: 0\n"), "{out}");
    assert!(out.contains("stdout:\nhi there\n"), "{out}");
    assert!(out.contains("stderr: (empty)"), "{out}");
}

#[tokio::test]
async fn nonzero_exit_is_reported_not_an_error() {
    let env = env();
    let out = env
        .ok("shell", json!({"command": "echo oops >&2; exit 4"}))
        .await;
    assert!(out.starts_with("exit_code: 4\n"), "{out}");
    assert!(out.contains("stderr:\noops\n"), "{out}");
}

#[tokio::test]
async fn timeout_kills_and_reports_partial_output() {
    let env = env();
    let msg = failed(
        env.call(
            "shell",
            json!({"command": "echo before; sleep 30", "timeout_secs": 1}),
        )
        .await,
    );
    assert!(msg.starts_with("timed out after 1 s"), "{msg}");
    assert!(msg.contains("before"), "{msg}");
}

#[tokio::test]
async fn long_output_keeps_head_and_tail_with_a_marker() {
    let env = env_with(BuiltinConfig {
        max_shell_output_chars: 1000,
        ..BuiltinConfig::default()
    });
    let out = env.ok("shell", json!({"command": "seq 1 20000"})).await;
    assert!(out.contains("characters truncated ...]"), "{out}");
    assert!(out.contains("stdout:\n1\n2\n3\n"), "{out}");
    assert!(out.contains("19999\n20000\n"), "{out}");
    assert!(out.len() < 1300, "{}", out.len());
}

#[tokio::test]
async fn cwd_is_resolved_inside_the_workspace() {
    let env = env();
    std::fs::create_dir(env.root().join("sub")).unwrap();
    let out = env
        .ok("shell", json!({"command": "pwd", "cwd": "sub"}))
        .await;
    assert!(out.contains("/sub\n"), "{out}");
    let msg = denied(
        env.call("shell", json!({"command": "pwd", "cwd": "../"}))
            .await,
    );
    assert!(msg.contains("outside the workspace"), "{msg}");
}

#[tokio::test]
async fn bad_arguments_name_the_field() {
    let env = env();
    let msg = invalid(env.call("shell", json!({})).await);
    assert!(msg.contains("command"), "{msg}");
    let msg = invalid(
        env.call("shell", json!({"command": "true", "bogus": 1}))
            .await,
    );
    assert!(msg.contains("bogus"), "{msg}");
    let msg = invalid(
        env.call("shell", json!({"command": "true", "timeout_secs": "x"}))
            .await,
    );
    assert!(msg.contains("timeout_secs"), "{msg}");
    let msg = invalid(
        env.call("shell", json!({"command": "true", "timeout_secs": 601}))
            .await,
    );
    assert!(msg.contains("600"), "{msg}");
}
