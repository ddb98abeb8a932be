//! `reef agent debug`: a breakpoint before `shell` pauses a daemon agent; the pause shows in
//! `reef questions`; an interactive session edits the command, steps and continues; a debug
//! command for an agent that is not paused exits 2 with the reason.

use crate::compaction::roomy_daemon_home;
use crate::daemon::Daemon;
use crate::reef;
use reef_test_support::{MockLlm, MockReply, RecordedRequest};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

const ORIGINAL: &str = "printf original > ran.txt; cat ran.txt";
const EDITED: &str = "printf edited > ran.txt; cat ran.txt";

/// Runs `ORIGINAL` in the shell, then reports the tool's result.
fn shell_then_report(r: &RecordedRequest) -> MockReply {
    if r.ends_with_tool_result() {
        MockReply::text(format!("result: {}", r.tool_results().join(" | ")))
    } else {
        MockReply::tool_call("shell", json!({ "command": ORIGINAL }))
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_edits_a_paused_shell_call_steps_and_continues() {
    let mock = MockLlm::start_responder_blocking(Arc::new(shell_then_report));
    let home = roomy_daemon_home(&mock);
    let d = Daemon::start(&home).await;
    let spawned = d
        .post("/v1/agents", json!({"name": "w", "template": "worker"}))
        .await;
    let workspace = PathBuf::from(spawned["workspace"].as_str().unwrap());

    // Nothing is paused yet: a command says so and exits 2.
    let out = reef(&home)
        .args(["agent", "debug", "w", "step"])
        .assert()
        .code(2);
    let stderr = text(&out.get_output().stderr);
    assert!(
        stderr.contains("agent w is not paused at a breakpoint"),
        "{stderr}"
    );
    let out = reef(&home)
        .args(["agent", "debug", "w", "--break", "tools", "status"])
        .assert()
        .code(2);
    let stderr = text(&out.get_output().stderr);
    assert!(
        stderr.contains("break: `tools` is not a breakpoint"),
        "{stderr}"
    );

    let out = reef(&home)
        .args(["agent", "debug", "w", "--break", "tool=shell", "status"])
        .assert()
        .success();
    assert_eq!(
        text(&out.get_output().stdout),
        "w is not paused (breakpoints: tool=shell)\n"
    );
    d.post("/v1/agents/w/messages", json!({"text": "make the file"}))
        .await;
    let out = reef(&home)
        .args(["agent", "debug", "w", "wait"])
        .assert()
        .success();
    let stdout = text(&out.get_output().stdout);
    assert!(
        stdout.starts_with("w paused before tool call `shell` (round 1, breakpoint bp_"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "  arguments: {}\n",
            json!({ "command": ORIGINAL })
        )),
        "{stdout}"
    );
    assert!(stdout.contains(" of 100000 tokens ("), "{stdout}");
    assert!(!workspace.join("ran.txt").exists());

    // The pause is a pending item every front end lists.
    let out = reef(&home).arg("questions").assert().success();
    let questions = text(&out.get_output().stdout);
    assert!(
        questions.contains("breakpoint") && questions.contains("w: paused before `shell`"),
        "{questions}"
    );

    // Interactive: the commands apply at each stop, in order; end of input clears the
    // breakpoints.
    let script = format!(
        "edit {}\nstep\ninspect\ncontinue\n",
        json!({ "command": EDITED })
    );
    let out = reef(&home)
        .args(["agent", "debug", "w"])
        .write_stdin(script)
        .assert()
        .success();
    let session = text(&out.get_output().stdout);
    assert!(
        session.contains(&format!(
            "  arguments (edited): {}\n",
            json!({ "command": EDITED })
        )),
        "{session}"
    );
    let round_two = session
        .find("w paused before model request (round 2")
        .unwrap_or_else(|| panic!("{session}"));
    let inspected = &session[round_two..];
    assert!(
        inspected.contains("--- tool result shell") && inspected.contains("stdout:\nedited\n"),
        "{session}"
    );
    assert!(
        session.ends_with("breakpoints cleared: w runs on\n"),
        "{session}"
    );

    d.wait(
        "the turn to end",
        "/v1/events?agent=w&kind=turn.ended",
        |e| e.as_array().is_some_and(|a| !a.is_empty()),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(workspace.join("ran.txt")).unwrap(),
        "edited"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].tool_results()[0].contains("stdout:\nedited\n"));
    let status: Value = serde_json::from_slice(
        &reef(&home)
            .args(["agent", "debug", "w", "status", "--json"])
            .assert()
            .success()
            .get_output()
            .stdout,
    )
    .unwrap();
    assert_eq!(status["breakpoints"], json!([]));
    assert_eq!(status["paused"], Value::Null);
}
