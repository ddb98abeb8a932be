//! `reef serve` with an IRC channel, against a real ngircd: an operator runs the fleet from
//! `#control` (each command checked through the HTTP API), a non-operator is refused,
//! `reef channels status` follows the server going down and coming back, and the agents
//! QUIT when the daemon stops.

use crate::daemon::Daemon;
use crate::reef;
use reef_test_support::{
    IrcClient, IrcLine, MockLlm, MockReply, Ngircd, RecordedRequest, TestHome,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn poet(req: &RecordedRequest) -> MockReply {
    if req.agent() == "ada" && req.last_user_text().is_some_and(|t| t.contains("haiku")) {
        if req.tool_results().is_empty() {
            return MockReply::tool_call(
                "write_file",
                json!({"path": "haiku.txt", "content": "reef of quiet light\n"}),
            );
        }
        return MockReply::text("haiku.txt is written");
    }
    MockReply::text("done")
}

fn home(mock: &MockLlm, ircd: &Ngircd) -> TestHome {
    let home = TestHome::new();
    home.write_config(&format!(
        "[model]\ndefault = \"main\"\n\n\
         [providers.main]\nbase_url = \"{url}\"\nmodel = \"mock-model\"\nstream = false\nmax_retries = 0\n\n\
         [providers.backup]\nbase_url = \"{url}\"\nmodel = \"backup-model\"\nstream = false\nmax_retries = 0\n\n\
         [daemon]\nlisten = \"127.0.0.1:0\"\n\n[sandbox]\nrequired = true\n\n\
         [channels.irc]\ntype = \"irc\"\nserver = \"{server}\"\n\n\
         [operators]\nirc = [\"alice!*@*\"]\n",
        url = mock.base_url(),
        server = ircd.address(),
    ));
    home
}

fn channel_state(home: &TestHome) -> Value {
    let out = reef(home)
        .args(["channels", "status", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Value = serde_json::from_slice(&out.stdout).unwrap();
    all[0].clone()
}

#[tokio::test]
async fn an_operator_runs_agents_from_irc_and_the_api_agrees() {
    let mut ircd = Ngircd::start();
    let mock = MockLlm::start_responder(Arc::new(poet)).await;
    let home = home(&mock, &ircd);
    let daemon = Daemon::start(&home).await;
    let mut alice = IrcClient::connect(ircd.port(), "alice").await;
    alice.join("#control").await;
    alice.join("#agents").await;
    // The overseer comes (it may have been first).
    loop {
        if channel_state(&home)["state"] == "up" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    alice
        .say(
            "#control",
            "!invoke ada coder write a haiku about reefs into haiku.txt",
        )
        .await;
    alice
        .expect_message("overseer", "#control", "ada is running")
        .await;
    alice
        .expect(|l| l.command == "JOIN" && l.nick.as_deref() == Some("ada"))
        .await;
    let report = alice.expect_message("ada", "#agents", "haiku").await;
    assert_eq!(report, "haiku.txt is written");
    let ada = daemon.get("/v1/agents/ada").await;
    assert_eq!(ada["template"], "coder");
    let haiku = std::path::Path::new(ada["workspace"].as_str().unwrap()).join("haiku.txt");
    assert_eq!(
        std::fs::read_to_string(haiku).unwrap(),
        "reef of quiet light\n"
    );

    alice.say("#control", "!list").await;
    alice
        .expect_message("overseer", "#control", "running (1): ada")
        .await;
    alice.say("#control", "!status").await;
    alice
        .expect_message("overseer", "#control", "1 agents: 1 running")
        .await;
    alice.say("#control", "!logs ada 5").await;
    alice
        .expect_message(
            "overseer",
            "#control",
            "turn.ended completed: haiku.txt is written",
        )
        .await;

    alice.say("#control", "!model ada backup").await;
    alice
        .expect_message("overseer", "#control", "ada now uses backup")
        .await;
    assert_eq!(daemon.get("/v1/agents/ada").await["model"], "backup");
    alice
        .say("#control", "!persona ada You answer in haiku.")
        .await;
    alice
        .expect_message("overseer", "#control", "new persona")
        .await;
    assert_eq!(
        daemon.get("/v1/agents/ada").await["persona"],
        "You answer in haiku."
    );
    alice.say("#control", "!pause ada").await;
    alice
        .expect_message("overseer", "#control", "ada is paused")
        .await;
    assert_eq!(daemon.get("/v1/agents/ada").await["state"], "paused");
    alice.say("#control", "!resume ada").await;
    alice
        .expect_message("overseer", "#control", "ada is running")
        .await;
    assert_eq!(daemon.get("/v1/agents/ada").await["state"], "running");

    let mut mallory = IrcClient::connect(ircd.port(), "mallory").await;
    mallory.join("#control").await;
    mallory.say("#control", "!destroy ada").await;
    mallory
        .expect_message(
            "overseer",
            "#control",
            "only operators may run commands here",
        )
        .await;
    assert_eq!(daemon.get("/v1/agents/ada").await["state"], "running");
    let refused = daemon.get("/v1/events?kind=operator.refused").await;
    assert_eq!(refused.as_array().map(Vec::len), Some(1), "{refused}");
    drop(mallory);

    // The server dies: the status says why and when the next attempt is; the daemon
    // still answers; the server comes back and so do the overseer and ada.
    drop(alice);
    ircd.kill();
    let down = loop {
        let state = channel_state(&home);
        // The first failure is the lost connection; the next ones say why connecting fails.
        if state["state"] == "down" && state["failures"].as_u64() >= Some(2) {
            break state;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        down["error"].as_str().unwrap().contains("cannot connect"),
        "{down}"
    );
    assert!(down["next_attempt_unix"].is_i64(), "{down}");
    let text = reef(&home).args(["channels", "status"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains("down") && text.contains("next attempt in"),
        "{text}"
    );
    assert_eq!(daemon.get("/v1/agents/ada").await["state"], "running");
    ircd.restart();
    let mut alice = IrcClient::connect(ircd.port(), "alice").await;
    alice.join("#control").await;
    alice.join("#agents").await;
    let back = tokio::time::timeout(Duration::from_secs(30), async {
        for (nick, room) in [("overseer", "#control"), ("ada", "#agents")] {
            alice
                .expect(|l| {
                    l.command == "JOIN" && l.nick.as_deref() == Some(nick) && l.params[0] == room
                })
                .await;
        }
    })
    .await;
    assert!(back.is_ok(), "not back within 30 s:\n{}", alice.tail(20));

    alice.say("#control", "!destroy ada").await;
    // ada's QUIT and the overseer's answer come from two connections, in either order.
    let destroyed = |l: &IrcLine| {
        l.nick.as_deref() == Some("overseer")
            && l.privmsg()
                .is_some_and(|(to, text)| to == "#control" && text.contains("ada is destroyed"))
    };
    let quit = |l: &IrcLine| l.command == "QUIT" && l.nick.as_deref() == Some("ada");
    alice.expect_each(&[&destroyed, &quit]).await;
    let agents = daemon.get("/v1/agents").await;
    assert_eq!(agents.as_array().map(Vec::len), Some(0), "{agents}");

    // On SIGTERM the overseer leaves with a QUIT.
    daemon.signal("-TERM");
    let quit = alice
        .expect(|l| l.command == "QUIT" && l.nick.as_deref() == Some("overseer"))
        .await;
    assert!(quit.raw.contains("reef is shutting down"), "{}", quit.raw);
}
