//! `reef sessions replay`: a stored session runs again from one of its user messages, in a
//! copy, against another provider.

use crate::{config_for, reef};
use reef_test_support::{MockLlm, MockReply, TestHome};
use serde_json::{Value, json};

/// The script both providers follow: the first task runs a shell command, then answers; the
/// second answers at once.
fn script() -> Vec<MockReply> {
    vec![
        MockReply::tool_call("shell", json!({"command": "echo replayed-output"})),
        MockReply::text("first done"),
        MockReply::text("second done"),
    ]
}

fn session_json(home: &TestHome, id: &str) -> Value {
    let out = reef(home)
        .args(["sessions", "show", id, "--json"])
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

/// The tool calls of a session, as (name, arguments).
fn calls(session: &Value) -> Vec<(String, String)> {
    session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            m["message"]["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["arguments"].to_string(),
            )
        })
        .collect()
}

#[test]
fn a_session_replayed_on_another_provider_makes_the_recorded_tool_calls() {
    let original = MockLlm::start_blocking(script());
    let other = MockLlm::start_blocking(script());
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[providers.other]\nwire_api = \"openai-chat\"\nbase_url = \"{}\"\nmodel = \"other-model\"\nmax_retries = 0\n",
        config_for(&original, "openai-chat", false),
        other.base_url()
    ));
    let out = reef(&home)
        .env("MOCK_API_KEY", "k")
        .args(["chat"])
        .write_stdin("run the command\nand now?\n/quit\n")
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("[session "))
        .and_then(|l| l.split_whitespace().next())
        .expect("a session line")
        .to_owned();
    let recorded = session_json(&home, &id);
    assert_eq!(
        recorded["messages"].as_array().unwrap().len(),
        6,
        "{recorded}"
    );

    // From the first message: the other provider is asked, and the same call runs again.
    let out = reef(&home)
        .env("MOCK_API_KEY", "k")
        .args(["sessions", "replay", &id, "--from", "1", "--model", "other"])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let copy = stderr
        .lines()
        .find_map(|l| l.split(" as session ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .expect("a replay line")
        .to_owned();
    assert_ne!(copy, id);
    let replayed = session_json(&home, &copy);
    assert_eq!(calls(&replayed), calls(&recorded));
    assert!(!calls(&recorded).is_empty());
    assert_eq!(
        other.requests().len(),
        3,
        "both inputs went to the other provider"
    );
    assert_eq!(
        other.requests()[1].tool_results(),
        vec![original.requests()[1].tool_results()[0].clone()],
        "the command ran again with the same output"
    );
    assert_eq!(replayed["session"]["model"], "other-model");
    // The original is untouched.
    assert_eq!(session_json(&home, &id)["messages"], recorded["messages"]);

    // From the second user message: the copy starts with the first task's messages.
    let fresh = MockLlm::start_blocking(vec![MockReply::text("second again")]);
    home.write_config(&format!(
        "{}\n[providers.other]\nwire_api = \"openai-chat\"\nbase_url = \"{}\"\nmodel = \"other-model\"\nmax_retries = 0\n",
        config_for(&original, "openai-chat", false),
        fresh.base_url()
    ));
    reef(&home)
        .env("MOCK_API_KEY", "k")
        .args(["sessions", "replay", &id, "--from", "5", "--model", "other"])
        .assert()
        .success();
    let sent = &fresh.requests()[0];
    assert_eq!(sent.last_user_text().as_deref(), Some("and now?"));
    assert!(
        sent.tool_results()
            .iter()
            .any(|r| r.contains("replayed-output"))
    );

    // A seq that is not a user message is refused, naming the ones that are.
    let out = reef(&home)
        .args(["sessions", "replay", &id, "--from", "2"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("--from 2") && stderr.contains("[1, 5]"),
        "{stderr}"
    );
}
