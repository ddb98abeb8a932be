//! What stays private across sessions: a secret's value is redacted in a later session that
//! never asked for it, and reef's home and database are the user's alone.

use super::{confined_home, run_ok};
use crate::{config_for, reef};
use reef_test_support::{MockLlm, MockReply, TestHome};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

const VALUE: &str = "s3cr3t-rotating-91Kq";

#[test]
fn a_secret_seen_in_an_earlier_session_is_still_redacted() {
    let mock = MockLlm::start_blocking(vec![
        MockReply::tool_call(
            "shell",
            json!({"command": "printf '%s\\n' \"$API_TOKEN\" > token.txt && echo saved",
                   "secrets": ["API_TOKEN"]}),
        ),
        MockReply::text("saved it"),
        // A new session that never asks for the secret reads the file back.
        MockReply::tool_call("shell", json!({"command": "cat token.txt"})),
        MockReply::tool_call("read_file", json!({"path": "token.txt"})),
        MockReply::text("read it"),
    ]);
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[sandbox]\nrequired = true\n\n[secrets.API_TOKEN]\nenv = \"REEF_TEST_TOKEN\"\n",
        config_for(&mock, "openai-chat", false)
    ));
    for prompt in ["save the token", "what is in token.txt?"] {
        reef(&home)
            .env("MOCK_API_KEY", "k")
            .env("REEF_TEST_TOKEN", VALUE)
            .args(["run", prompt])
            .assert()
            .success();
    }
    // Positive control: the value really is in the file the second session reads.
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("token.txt")).unwrap(),
        format!("{VALUE}\n")
    );
    let requests = mock.requests();
    let last = requests.last().unwrap();
    assert_eq!(
        last.last_user_text().as_deref(),
        Some("what is in token.txt?"),
        "a new session"
    );
    let results = last.tool_results();
    assert_eq!(results.len(), 2, "{results:?}");
    for result in &results {
        assert!(
            !result.contains(VALUE),
            "the value reached the model: {result}"
        );
        assert!(result.contains("[secret API_TOKEN]"), "{result}");
    }
    // Nor does the store keep it in clear (only a salted hash is remembered).
    let db = std::fs::read(home.reef_home().join("reef.db")).unwrap();
    assert!(
        !db.windows(VALUE.len()).any(|w| w == VALUE.as_bytes()),
        "the value is in reef.db"
    );
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_home_and_the_database_are_private() {
    let (_mock, home) = confined_home(vec![MockReply::text("hi")]);
    std::fs::set_permissions(home.reef_home(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (_, stderr) = run_ok(&home, "hello");
    let db = home.reef_home().join("reef.db");
    assert_eq!(mode(&home.reef_home()), 0o700, "{stderr}");
    assert!(
        stderr.contains("made") && stderr.contains("private"),
        "{stderr}"
    );
    assert_eq!(mode(&db), 0o600);
    let wal = home.reef_home().join("reef.db-wal");
    if wal.exists() {
        assert_eq!(mode(&wal), 0o600);
    }

    // A database an older reef left readable is tightened when it is next opened.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = reef(&home).args(["sessions", "list"]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(mode(&db), 0o600);
    assert!(
        stderr.contains("reef.db") && stderr.contains("0600"),
        "{stderr}"
    );

    // A fresh home is created private.
    let fresh = TestHome::new();
    std::fs::remove_dir(fresh.reef_home()).unwrap();
    reef(&fresh).args(["sessions", "list"]).assert().success();
    assert_eq!(mode(&fresh.reef_home()), 0o700);
    assert_eq!(mode(&fresh.reef_home().join("reef.db")), 0o600);
}

#[test]
fn a_secret_used_by_a_turn_cut_short_is_still_remembered() {
    let mock = MockLlm::start_blocking(vec![
        // The command keeps the value, then outlives the turn's wall-clock budget.
        MockReply::tool_call(
            "shell",
            json!({"command": "printf '%s\\n' \"$API_TOKEN\" > kept.txt; sleep 60",
                   "secrets": ["API_TOKEN"], "timeout_secs": 120}),
        ),
        MockReply::tool_call("shell", json!({"command": "cat kept.txt"})),
        MockReply::text("read it"),
    ]);
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[sandbox]\nrequired = true\n\n[secrets.API_TOKEN]\nenv = \"REEF_TEST_TOKEN\"\n",
        config_for(&mock, "openai-chat", false)
    ));
    reef(&home)
        .env("MOCK_API_KEY", "k")
        .env("REEF_TEST_TOKEN", VALUE)
        .args(["-c", "agent.max_wall_secs=2", "run", "keep the token"])
        .assert()
        .code(4);
    assert_eq!(
        std::fs::read_to_string(home.workspace().join("kept.txt")).unwrap(),
        format!("{VALUE}\n"),
        "the command kept the value"
    );
    run_ok_with_token(&home, "what is in kept.txt?");
    let result = mock
        .requests()
        .last()
        .unwrap()
        .tool_results()
        .pop()
        .unwrap();
    assert!(
        !result.contains(VALUE),
        "the value reached the model: {result}"
    );
    assert!(result.contains("[secret API_TOKEN]"), "{result}");
}

fn run_ok_with_token(home: &TestHome, prompt: &str) {
    reef(home)
        .env("MOCK_API_KEY", "k")
        .env("REEF_TEST_TOKEN", VALUE)
        .args(["run", prompt])
        .assert()
        .success();
}
