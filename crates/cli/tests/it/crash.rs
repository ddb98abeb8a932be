//! A `reef run` killed with SIGKILL mid-turn loses nothing already said, and the session resumes.

use crate::{home_for, last_session, last_transcript, reef};
use reef_test_support::{MockLlm, MockReply};
use serde_json::json;
use std::time::Duration;

#[test]
fn sigkill_mid_turn_keeps_the_transcript_and_the_session_resumes() {
    // Found by its command line for the clean-up below (`$$` is a pid of the sandbox's pid
    // namespace, not of the host).
    let seconds = (200_000 + std::process::id()).to_string();
    let mock = MockLlm::start_blocking(vec![
        MockReply::tool_call(
            "shell",
            json!({
                "command": format!("echo $$ > started.pid; exec sleep {seconds}"),
                "timeout_secs": 120
            }),
        ),
        MockReply::text("picking up where we left off"),
    ]);
    let home = home_for(&mock, "openai-chat", true);
    let mut child = spawn_reef(&home, "start a long job");
    let pid_file = home.workspace().join("started.pid");
    assert!(poll(|| pid_written(&pid_file)), "the tool never started");
    child.kill().unwrap();
    child.wait().unwrap();
    // The tool may outlive a SIGKILLed reef (depending on the backend): clean up.
    for pid in live_processes(&["sleep", &seconds]) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }

    let id = last_session(&home);
    let doc = last_transcript(&home);
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
    // The sleeper is found by its command line: inside the sandbox's pid namespace `$!` is not
    // a host pid. The duration is unique to this test process so parallel runs don't mix.
    let seconds = (100_000 + std::process::id()).to_string();
    let mock = MockLlm::start_blocking(vec![MockReply::tool_call(
        "shell",
        json!({
            "command": format!("sleep {seconds} & echo $! > sleeper.pid; wait"),
            "timeout_secs": 120
        }),
    )]);
    let home = home_for(&mock, "anthropic", true);
    let child = spawn_reef(&home, "sleep a while");
    let pid_file = home.workspace().join("sleeper.pid");
    assert!(poll(|| pid_written(&pid_file)), "the tool never started");
    assert!(
        poll(|| !live_processes(&["sleep", &seconds]).is_empty()),
        "the sleeper is not visible in /proc"
    );
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

    let gone = poll(|| live_processes(&["sleep", &seconds]).is_empty());
    assert!(
        gone,
        "the tool's `sleep {seconds}` outlived the interrupt: pids {:?}",
        live_processes(&["sleep", &seconds])
    );
    let doc = last_transcript(&home);
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

/// Host pids of processes, not zombies, whose command line is exactly `argv`.
fn live_processes(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want)
                && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| !s.contains(") Z "))
        })
        .collect()
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
