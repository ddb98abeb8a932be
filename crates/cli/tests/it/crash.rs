//! A `reef run` killed with SIGKILL mid-turn loses nothing already said, and the session resumes.

use crate::{home_for, last_session, reef};
use reef_test_support::{MockLlm, MockReply};
use serde_json::{Value, json};
use std::time::Duration;

#[test]
fn sigkill_mid_turn_keeps_the_transcript_and_the_session_resumes() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::tool_call(
            "shell",
            json!({"command": "echo $$ > started.pid; exec sleep 60", "timeout_secs": 120}),
        ),
        MockReply::text("picking up where we left off"),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    let mut child = spawn_reef(&home, "start a long job");
    let pid_file = home.workspace().join("started.pid");
    assert!(poll(|| pid_written(&pid_file)), "the tool never started");
    child.kill().unwrap();
    child.wait().unwrap();
    // The tool's process group outlives a SIGKILLed reef (no parent-death kill yet): clean up.
    let tool_pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    let _ = std::process::Command::new("sh")
        .args(["-c", &format!("kill -9 {tool_pid}")])
        .status();

    let id = last_session(&home);
    let out = reef(&home)
        .args(["sessions", "show", &id, "--json"])
        .assert()
        .success();
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let messages = doc["messages"].as_array().unwrap();
    assert_eq!(
        messages.len(),
        2,
        "user message and the tool call survived: {doc}"
    );
    assert_eq!(messages[0]["message"]["content"], "start a long job");
    assert_eq!(messages[1]["message"]["tool_calls"][0]["name"], "shell");
    assert_eq!(doc["usage"].as_array().unwrap().len(), 1);

    reef(&home)
        .args(["run", "--session", &id, "continue"])
        .assert()
        .success()
        .stdout(predicates::str::contains("picking up where we left off"));
    let resumed = &mock.requests()[1];
    assert_eq!(resumed.tool_results().len(), 1);
    assert!(resumed.tool_results()[0].contains("interrupted"));
}

#[test]
fn ctrl_c_interrupts_the_turn_kills_the_tool_and_exits_130() {
    let mock = MockLlm::start_blocking(vec![MockReply::tool_call(
        "shell",
        json!({"command": "sleep 60 & echo $! > sleeper.pid; wait", "timeout_secs": 120}),
    )]);
    let home = home_for(&mock, "anthropic", true);
    let child = spawn_reef(&home, "sleep a while");
    let pid_file = home.workspace().join("sleeper.pid");
    assert!(poll(|| pid_written(&pid_file)), "the tool never started");
    let status = std::process::Command::new("sh")
        .args(["-c", &format!("kill -INT {}", child.id())])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");

    let sleeper = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    let gone = poll(|| {
        std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true)
    });
    assert!(gone, "the tool's process {sleeper} outlived the interrupt");
    let id = last_session(&home);
    let out = reef(&home)
        .args(["sessions", "show", &id, "--json"])
        .assert()
        .success();
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(doc["messages"].as_array().unwrap().len(), 2, "{doc}");
}

/// `reef run PROMPT` as a child process with piped output, in `home`'s hermetic environment.
fn spawn_reef(home: &reef_test_support::TestHome, prompt: &str) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_reef"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("REEF_HOME", home.reef_home())
        .current_dir(home.workspace())
        .args(["run", prompt])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether a shell has finished writing a pid (and its newline) to `path`.
fn pid_written(path: &std::path::Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.ends_with('\n'))
}

/// Polls `cond` a bounded number of times (effects in other processes).
fn poll(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..400 {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    false
}
