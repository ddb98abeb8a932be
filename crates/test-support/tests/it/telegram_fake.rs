//! The fake Bot API is checked by the platform's real client library: python-telegram-bot
//! long-polls it, downloads a file, confirms updates by offset, sends a message with an
//! entity, and meets the fake's refusal of a too-long text and a 429 as the library's own
//! errors. If the fake strayed from the Bot API, the library could not read its answers.

use reef_test_support::telegram::{BOT_ID, BOT_USERNAME, FakeTelegram};
use reef_test_support::venv_python;
use serde_json::Value;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_telegram_bot_reads_the_fake_as_the_bot_api() {
    let python = venv_python("telegram", "python-telegram-bot>=21,<23");
    let token = "4242:fake-token";
    let fake = FakeTelegram::start(token).await;
    // The script's one deleteWebhook meets a 429.
    fake.limit_next("deleteWebhook", 7);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("ptb_client.py");
    std::fs::write(&script, include_str!("../python/ptb_client.py")).unwrap();
    let child = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(fake.url())
        .arg(token)
        .arg("555")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The update comes while the library's long poll waits.
    for _ in 0..500 {
        if fake.calls().iter().any(|(m, _)| m == "getUpdates") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let update = fake.push_photo(555, (555, "alice"), b"jpegbytes", "look");
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "python-telegram-bot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["me"]["id"], BOT_ID);
    assert_eq!(seen["me"]["username"], BOT_USERNAME);
    assert_eq!(seen["me"]["is_bot"], true);
    assert_eq!(seen["update_id"], update);
    assert_eq!(seen["caption"], "look");
    assert_eq!(seen["chat_type"], "private");
    assert_eq!(seen["from"], "alice");
    assert_eq!(seen["photo_bytes"], 9);
    assert_eq!(seen["after"], 0, "the offset confirmed the update");
    assert_eq!(seen["sent"]["text"], "hello 🐠 world");
    // Offsets are UTF-16: the fish is two units.
    assert_eq!(seen["sent"]["bold"][0], "🐠");
    assert!(
        seen["too_long"].as_str().unwrap().contains("too long"),
        "{seen}"
    );
    assert_eq!(seen["retry_after"], 7.0);
    let sent = fake.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].chat_id, 555);
    assert_eq!(fake.actions(), [(555, "typing".to_owned())]);
    assert_eq!(fake.pending(), 0);
}
