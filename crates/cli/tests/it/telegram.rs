//! A Telegram bot through `reef serve`: long polling that survives a SIGKILL of the daemon
//! (nothing lost, nothing answered twice), webhook deliveries through the daemon's
//! `/hooks/telegram/NAME` with the secret token checked, and `reef channels status`.

use crate::daemon::Daemon;
use crate::reef;
use reef_test_support::telegram::FakeTelegram;
use reef_test_support::{MockLlm, MockReply, RecordedRequest, TestHome};
use std::sync::Arc;

const TOKEN: &str = "8080:cli-test-token";
const ALICE: i64 = 1001;

fn echo() -> MockLlm {
    MockLlm::start_responder_blocking(Arc::new(|req: &RecordedRequest| {
        let said = req.last_user_text().unwrap_or_default();
        // What the person wrote starts with "message"; the rest is reef's fence around it.
        let line = said
            .rfind("message ")
            .map(|at| said[at..].lines().next().unwrap_or("").trim().to_owned())
            .unwrap_or_default();
        MockReply::text(format!("got: {line}"))
    }))
}

/// A home whose daemon listens on `listen` with `[channels.tg]` on the fake, plus `channel`.
fn home(mock: &MockLlm, fake: &FakeTelegram, listen: &str, channel: &str) -> TestHome {
    let home = TestHome::new();
    let token_file = home.path().join("tg-token");
    std::fs::write(&token_file, TOKEN).unwrap();
    home.write_config(&format!(
        "[providers.main]\nbase_url = \"{}\"\nmodel = \"mock-model\"\nstream = false\n\
         max_retries = 0\n\n[daemon]\nlisten = \"{listen}\"\n\n[sandbox]\nrequired = true\n\n\
         [secrets.TG_TOKEN]\nfile = \"{}\"\n\n\
         [channels.tg]\ntype = \"telegram\"\ntoken_secret = \"TG_TOKEN\"\napi_url = \"{}\"\n\
         route = \"spawn:worker\"\npoll_timeout_secs = 2\n{channel}\n",
        mock.base_url(),
        token_file.display(),
        fake.url()
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
async fn long_polling_survives_a_killed_daemon_without_loss_or_repeats() {
    let mock = echo();
    let fake = FakeTelegram::start(TOKEN).await;
    let home = home(&mock, &fake, "127.0.0.1:0", "");
    let daemon = Daemon::start(&home).await;
    fake.push_text(ALICE, (ALICE, "alice"), "message one");
    let sent = fake.wait_sent(1).await;
    assert_eq!(sent[0].text, "got: message one");
    // Killed with no chance to clean up; people go on writing.
    daemon.kill();
    fake.push_text(ALICE, (ALICE, "alice"), "message two");
    fake.push_text(ALICE, (ALICE, "alice"), "message three");
    let daemon = Daemon::start(&home).await;
    let sent = fake.wait_sent(3).await;
    let texts: Vec<&str> = sent.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(
        texts,
        ["got: message one", "got: message two", "got: message three"]
    );
    for text in ["message one", "message two", "message three"] {
        assert_eq!(heard(&mock, text), 1, "{text}");
    }
    let out = reef(&home).args(["channels", "status"]).assert().success();
    let status = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(status.contains("tg") && status.contains("telegram") && status.contains("up"));
    assert!(status.contains("2 in, 2 out"), "{status}");
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_deliveries_reach_the_agent_through_the_daemon() {
    let mock = echo();
    let fake = FakeTelegram::start(TOKEN).await;
    // The platform must know the daemon's address before it starts.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/hooks/telegram/tg");
    let home = home(
        &mock,
        &fake,
        &format!("127.0.0.1:{port}"),
        &format!("mode = \"webhook\"\nwebhook_url = \"{url}\""),
    );
    let daemon = Daemon::start(&home).await;
    fake.push_text(ALICE, (ALICE, "alice"), "message by webhook");
    let sent = fake.wait_sent(1).await;
    assert_eq!(sent[0].text, "got: message by webhook");
    assert_eq!(heard(&mock, "message by webhook"), 1);
    // The fake was answered 200 once the message was handled.
    for _ in 0..500 {
        if !fake.delivered().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(fake.delivered().len(), 1);
    let hooks = fake
        .calls()
        .into_iter()
        .filter(|(m, _)| m == "setWebhook")
        .collect::<Vec<_>>();
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0].1["url"], url);
    let secret = hooks[0].1["secret_token"].as_str().unwrap().to_owned();
    assert!(secret.len() >= 32);
    // A delivery without the secret, or with another, is refused and reaches nobody.
    let http = reef_llm::http_client(None).unwrap();
    for header in [None, Some("not-the-secret")] {
        let mut request = http.post(&url).json(
            &serde_json::json!({"update_id": 1, "message": {"message_id": 9,
                "date": 1, "chat": {"id": ALICE, "type": "private"},
                "from": {"id": ALICE, "is_bot": false, "first_name": "mallory"},
                "text": "message forged"}}),
        );
        if let Some(h) = header {
            request = request.header("X-Telegram-Bot-Api-Secret-Token", h);
        }
        assert_eq!(request.send().await.unwrap().status(), 401);
    }
    assert_eq!(heard(&mock, "forged"), 0);
    drop(daemon);
}
