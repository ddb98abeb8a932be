//! The fake Slack is checked by the platform's real client library: slack_sdk calls
//! auth.test, opens Socket Mode, acknowledges an envelope, posts its reply in the thread
//! (meeting a 429 its retry handler waits out), follows a `disconnect` to a new connection,
//! and reads the fake's refusals as the library's own errors. If the fake strayed from
//! Slack's wire format, the library could not follow it.

use reef_test_support::slack::{BOT_USER, FakeSlack, TEAM_ID};
use reef_test_support::venv_python;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_sdk_reads_the_fake_as_slack() {
    let python = venv_python("slack_sdk", "slack_sdk>=3.30,<4");
    let (bot, app) = ("xoxb-fake-bot", "xapp-fake-app");
    let fake = FakeSlack::start(bot, app).await;
    fake.limit_next("chat.postMessage", 1);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("slack_client.py");
    std::fs::write(&script, include_str!("../python/slack_client.py")).unwrap();
    let mut child = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(fake.api_url())
        .arg(bot)
        .arg(app)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(next_line(&mut lines).await, "connected");
    let first = fake.push_dm("D0ALICE", "U0ALICE", "hello");
    assert_eq!(next_line(&mut lines).await, "posted");
    // Slack refreshes the connection; the next envelope goes to the new one.
    fake.disconnect("refresh_requested");
    fake.wait(|f| f.opens() == 2 && f.connected(), "a new connection")
        .await;
    fake.push_dm("D0ALICE", "U0ALICE", "again");
    assert_eq!(next_line(&mut lines).await, "posted");
    let last = next_line(&mut lines).await;
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "slack_sdk failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last}"));
    assert_eq!(seen["auth"]["user_id"], BOT_USER);
    assert_eq!(seen["auth"]["team_id"], TEAM_ID);
    assert_eq!(seen["wrong_token"], "invalid_auth");
    assert_eq!(seen["empty"], "no_text");
    let events = seen["events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{seen}");
    assert_eq!(events[0]["text"], "hello");
    assert_eq!(events[1]["text"], "again");
    assert_eq!(seen["posted"][0]["thread_ts"], first.as_str());
    // Both envelopes acknowledged; the 429 waited out (two posts for the first reply).
    assert_eq!(fake.acked().len(), 2);
    assert_eq!(fake.pending(), 0);
    let posted = fake.posted();
    assert_eq!(posted.len(), 2);
    assert_eq!(posted[0].text, "echo: hello");
    assert_eq!(posted[0].thread_ts.as_deref(), Some(first.as_str()));
    let posts = fake
        .calls()
        .iter()
        .filter(|(m, _)| m == "chat.postMessage")
        .count();
    assert_eq!(
        posts, 4,
        "the limited post, its retry, the second reply, the empty one"
    );
}

async fn next_line(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    lines.next_line().await.unwrap().unwrap_or_default()
}
