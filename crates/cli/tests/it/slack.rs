//! A Slack app through `reef serve`: Socket Mode that survives a SIGKILL of the daemon
//! (what was not acknowledged comes again on the new connection: nothing lost, nothing
//! answered twice), and the Events API at `/hooks/slack/NAME` with requests signed by
//! slack_sdk's own helper: the URL verification challenge answered, a wrong signature and a
//! stale timestamp refused, an event answered in its thread.

use crate::daemon::Daemon;
use crate::reef;
use reef_test_support::slack::{FakeSlack, event_callback};
use reef_test_support::{MockLlm, MockReply, RecordedRequest, TestHome, venv_python};
use serde_json::{Value, json};
use std::sync::Arc;

const BOT_TOKEN: &str = "xoxb-cli-bot";
const APP_TOKEN: &str = "xapp-cli-app";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

fn echo() -> MockLlm {
    MockLlm::start_responder_blocking(Arc::new(|req: &RecordedRequest| {
        let said = req.last_user_text().unwrap_or_default();
        let line = said
            .rfind("message ")
            .map(|at| said[at..].lines().next().unwrap_or("").trim().to_owned())
            .unwrap_or_default();
        MockReply::text(format!("got: {line}"))
    }))
}

/// A home with `[channels.sl]` on the fake; `mode` is its mode's lines.
fn home(mock: &MockLlm, fake: &FakeSlack, mode: &str) -> TestHome {
    let home = TestHome::new();
    let mut secrets = String::new();
    for (name, value) in [
        ("SLACK_BOT", BOT_TOKEN),
        ("SLACK_APP", APP_TOKEN),
        ("SLACK_SIGNING", SIGNING_SECRET),
    ] {
        let file = home.path().join(name);
        std::fs::write(&file, value).unwrap();
        secrets.push_str(&format!(
            "[secrets.{name}]\nfile = \"{}\"\n\n",
            file.display()
        ));
    }
    home.write_config(&format!(
        "[providers.main]\nbase_url = \"{}\"\nmodel = \"mock-model\"\nstream = false\n\
         max_retries = 0\n\n[daemon]\nlisten = \"127.0.0.1:0\"\n\n[sandbox]\nrequired = true\n\n\
         {secrets}[channels.sl]\ntype = \"slack\"\nbot_token_secret = \"SLACK_BOT\"\n\
         api_url = \"{}\"\nroute = \"spawn:worker\"\n{mode}\n",
        mock.base_url(),
        fake.api_url(),
    ));
    home
}

fn heard(mock: &MockLlm, text: &str) -> usize {
    mock.requests()
        .iter()
        .filter_map(RecordedRequest::last_user_text)
        .filter(|t| t.contains(text))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_mode_survives_a_killed_daemon_without_loss_or_repeats() {
    let mock = echo();
    let fake = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = home(&mock, &fake, "app_token_secret = \"SLACK_APP\"");
    let daemon = Daemon::start(&home).await;
    fake.wait(FakeSlack::connected, "the daemon's Socket Mode connection")
        .await;
    fake.push_dm("D0ALICE", "U0ALICE", "message one");
    let posted = fake.wait_posted(1).await;
    assert_eq!(posted[0].text, "got: message one");
    daemon.kill();
    fake.wait(|f| !f.connected(), "the connection dropped")
        .await;
    fake.push_dm("D0ALICE", "U0ALICE", "message two");
    fake.push_dm("D0ALICE", "U0ALICE", "message three");
    let daemon = Daemon::start(&home).await;
    let posted = fake.wait_posted(3).await;
    let texts: Vec<&str> = posted.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(
        texts,
        ["got: message one", "got: message two", "got: message three"]
    );
    for text in ["message one", "message two", "message three"] {
        assert_eq!(heard(&mock, text), 1, "{text}");
    }
    fake.wait(|f| f.pending() == 0, "every envelope acknowledged")
        .await;
    let out = reef(&home).args(["channels", "status"]).assert().success();
    let status = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        status.contains("sl") && status.contains("slack") && status.contains("up"),
        "{status}"
    );
    assert!(status.contains("2 in, 2 out"), "{status}");
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_api_requests_signed_by_slack_sdk_reach_the_agent() {
    let python = venv_python("slack_sdk", "slack_sdk>=3.30,<4");
    let mock = echo();
    let fake = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let home = home(
        &mock,
        &fake,
        "mode = \"events\"\nsigning_secret_secret = \"SLACK_SIGNING\"",
    );
    let daemon = Daemon::start(&home).await;
    let event = event_callback(json!({
        "type": "app_mention", "channel": "C0GENERAL", "user": "U0ALICE",
        "text": "<@U0REEFBOT> message from the events api",
        "ts": "1700000000.000777", "event_ts": "1700000000.000777",
    }));
    let event_file = home.path().join("event.json");
    std::fs::write(&event_file, event.to_string()).unwrap();
    let out = std::process::Command::new(&python)
        .arg(crate_dir().join("tests/python/slack_events.py"))
        .arg(daemon.base())
        .arg("sl")
        .arg(SIGNING_SECRET)
        .arg(&event_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["challenge"][0], 200, "{seen}");
    let challenge: Value = serde_json::from_str(seen["challenge"][1].as_str().unwrap()).unwrap();
    assert_eq!(
        challenge["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );
    assert_eq!(seen["wrong_signature"][0], 401, "{seen}");
    assert_eq!(seen["stale"][0], 401, "{seen}");
    assert!(
        seen["stale"][1]
            .as_str()
            .unwrap()
            .contains("seconds from now"),
        "{seen}"
    );
    assert_eq!(seen["event"][0], 200, "{seen}");
    let posted = fake.wait_posted(1).await;
    assert_eq!(posted[0].channel, "C0GENERAL");
    assert_eq!(posted[0].thread_ts.as_deref(), Some("1700000000.000777"));
    assert_eq!(posted[0].text, "U0ALICE: got: message from the events api");
    assert_eq!(heard(&mock, "message from the events api"), 1);
    drop(daemon);
}

/// The directory of the crate under test: from cargo at run time (a test binary reused from
/// another checkout of the workspace would otherwise look in that checkout), else from the
/// build.
fn crate_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(
        || env!("CARGO_MANIFEST_DIR").into(),
        std::path::PathBuf::from,
    )
}
