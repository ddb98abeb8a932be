//! The fake Discord is checked by the platform's real client library: discord.py logs in
//! over REST, identifies on the gateway, receives DMs, answers them (the first answer meets
//! a 429 it must wait out), resumes after a RECONNECT with what it missed replayed, and
//! meets the fake's refusal of a too-long message as the library's own error. If the fake
//! strayed from Discord's wire format, the library could not follow it.

use reef_test_support::discord::{BOT_ID, BOT_NAME, FakeDiscord, dm_channel};
use reef_test_support::venv_python;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_py_reads_the_fake_as_discord() {
    let python = venv_python("discord", "discord.py>=2.4,<3");
    let token = "fake.discord.token";
    let fake = FakeDiscord::start(token).await;
    fake.limit_next(0.2);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("discord_client.py");
    std::fs::write(&script, include_str!("../python/discord_client.py")).unwrap();
    let mut child = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(fake.api_url())
        .arg(fake.gateway_url())
        .arg(token)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(next_line(&mut lines).await, "ready");
    let alice = ("300000000000000001", "alice");
    let (channel, first) = fake.push_dm(alice, "hello");
    assert_eq!(next_line(&mut lines).await, "sent");
    // The gateway asks for a reconnect; a message comes meanwhile and reaches the client
    // once, replayed on RESUME or sent live.
    fake.ask_reconnect();
    let (_, second) = fake.push_dm(alice, "again");
    assert_eq!(next_line(&mut lines).await, "sent");
    let last = tokio::time::timeout(std::time::Duration::from_secs(30), next_line(&mut lines))
        .await
        .unwrap_or_else(|_| {
            panic!(
                "discord.py never finished: {} identifies, {} resumes, closes {:?}, sent {:?}",
                fake.identifies(),
                fake.resumes(),
                fake.closes(),
                fake.sent()
            )
        });
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "discord.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(&last).unwrap_or_else(|e| panic!("{e}: {last}"));
    assert_eq!(seen["me"]["id"], BOT_ID);
    assert_eq!(seen["me"]["name"], BOT_NAME);
    assert_eq!(seen["me"]["bot"], true);
    let messages = seen["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{seen}");
    assert_eq!(messages[0]["content"], "hello");
    assert_eq!(messages[0]["id"], first.as_str());
    assert_eq!(messages[0]["dm"], true);
    assert_eq!(messages[0]["author"], "alice");
    assert_eq!(messages[1]["id"], second.as_str());
    assert_eq!(seen["resumed"], 1, "{seen}");
    assert_eq!(fake.resumes(), 1);
    assert_eq!(fake.identifies(), 1);
    assert!(fake.heartbeats() >= 2, "a heartbeat on each connection");
    // The 429 was waited out.
    assert_eq!(fake.limits_served(), 1);
    let sent = fake.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].content, "echo: hello");
    assert_eq!(sent[0].channel_id, channel);
    assert_eq!(channel, dm_channel(alice.0));
    assert_eq!(seen["sent"][0]["id"], sent[0].id.as_str());
    assert_eq!(seen["sent"][1]["content"], "echo: again");
    assert_eq!(seen["too_long"]["status"], 400);
    assert_eq!(seen["too_long"]["code"], 50035);
}

async fn next_line(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    lines.next_line().await.unwrap().unwrap_or_default()
}
