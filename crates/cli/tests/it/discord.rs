//! A Discord bot through `reef serve`: the gateway session survives a SIGKILL of the
//! daemon (the restarted daemon resumes it from the kept cursor: nothing lost, nothing
//! answered twice), and `reef channels status` shows it.

use crate::daemon::Daemon;
use crate::reef;
use reef_test_support::discord::FakeDiscord;
use reef_test_support::{MockLlm, MockReply, RecordedRequest, TestHome};
use std::sync::Arc;

const TOKEN: &str = "cli.discord.token";
const ALICE: (&str, &str) = ("300000000000000001", "alice");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_daemon_resumes_its_gateway_session_without_loss_or_repeats() {
    let mock = MockLlm::start_responder_blocking(Arc::new(|req: &RecordedRequest| {
        let said = req.last_user_text().unwrap_or_default();
        let line = said
            .rfind("message ")
            .map(|at| said[at..].lines().next().unwrap_or("").trim().to_owned())
            .unwrap_or_default();
        MockReply::text(format!("got: {line}"))
    }));
    let fake = FakeDiscord::start(TOKEN).await;
    let home = TestHome::new();
    let token_file = home.path().join("dc-token");
    std::fs::write(&token_file, TOKEN).unwrap();
    home.write_config(&format!(
        "[providers.main]\nbase_url = \"{}\"\nmodel = \"mock-model\"\nstream = false\n\
         max_retries = 0\n\n[daemon]\nlisten = \"127.0.0.1:0\"\n\n[sandbox]\nrequired = true\n\n\
         [secrets.DC_TOKEN]\nfile = \"{}\"\n\n\
         [channels.dc]\ntype = \"discord\"\ntoken_secret = \"DC_TOKEN\"\n\
         api_url = \"{}\"\ngateway_url = \"{}\"\nroute = \"spawn:worker\"\n",
        mock.base_url(),
        token_file.display(),
        fake.api_url(),
        fake.gateway_url(),
    ));
    let daemon = Daemon::start(&home).await;
    fake.wait(FakeDiscord::connected, "the daemon's gateway connection")
        .await;
    fake.push_dm(ALICE, "message one");
    let sent = fake.wait_sent(1).await;
    assert_eq!(sent[0].content, "got: message one");
    // Killed with no chance to close; people go on writing, and the session keeps it.
    daemon.kill();
    fake.wait(|f| !f.connected(), "the connection dropped")
        .await;
    fake.push_dm(ALICE, "message two");
    fake.push_dm(ALICE, "message three");
    let daemon = Daemon::start(&home).await;
    let sent = fake.wait_sent(3).await;
    let texts: Vec<&str> = sent.iter().map(|s| s.content.as_str()).collect();
    assert_eq!(
        texts,
        ["got: message one", "got: message two", "got: message three"]
    );
    assert_eq!((fake.identifies(), fake.resumes()), (1, 1));
    for text in ["message one", "message two", "message three"] {
        let times = mock
            .requests()
            .iter()
            .filter_map(RecordedRequest::last_user_text)
            .filter(|t| t.contains(text))
            .count();
        assert_eq!(times, 1, "{text}");
    }
    let out = reef(&home).args(["channels", "status"]).assert().success();
    let status = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        status.contains("dc") && status.contains("discord") && status.contains("up"),
        "{status}"
    );
    assert!(status.contains("2 in, 2 out"), "{status}");
    drop(daemon);
}
