//! Compacting and restarting a conversation: `/compact`, `/new` and `/model` in `reef chat`,
//! `reef agent compact|reset` through the daemon, and where `reef sessions show` and
//! `reef agent logs` put a compaction.

use crate::daemon::Daemon;
use crate::{config_for, reef};
use reef_test_support::{MockLlm, MockReply, RecordedRequest, TestHome};
use serde_json::{Value, json};
use std::sync::Arc;

/// The summary the mock writes when asked to compact.
const SUMMARY: &str = "SUMMARY-OF-EARLIER: the user described gardens 2 and 3";

/// Garden `n`, described at length (about 180 tokens).
fn garden(n: u32) -> String {
    format!(
        "Garden {n}: {}",
        "tomatoes, basil and marigolds grow along the southern wall. ".repeat(12)
    )
}

/// Summarizes when asked to compact; otherwise acknowledges.
fn gardener(req: &RecordedRequest) -> MockReply {
    if req.system_text().contains("You compact the history") {
        MockReply::text(SUMMARY)
    } else {
        MockReply::text(format!("noted ({} messages)", req.message_count()))
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether any message sent in `req` contains `needle`.
fn sent(req: &RecordedRequest, needle: &str) -> bool {
    req.messages()
        .iter()
        .any(|m| m["content"].as_str().is_some_and(|c| c.contains(needle)))
}

#[test]
fn chat_compacts_starts_a_new_session_and_switches_models_on_one_session() {
    let mock = MockLlm::start_responder_blocking(Arc::new(gardener));
    let home = TestHome::new();
    home.write_config(&format!(
        "{}context_tokens = 4096\n\n[agent]\nkeep_recent_turns = 1\n",
        config_for(&mock, "openai-chat", true)
    ));
    let input = format!(
        "{}\n{}\n{}\n/compact\nWhich gardens do you know?\n/model nosuch\n/model main\n\
         /new\nfresh start\n/quit\n",
        garden(1),
        garden(2),
        garden(3)
    );
    let out = reef(&home)
        .arg("chat")
        .write_stdin(input)
        .assert()
        .success();
    let stderr = text(&out.get_output().stderr);

    // The summarizer was asked, with the middle of the conversation.
    let requests = mock.requests();
    let summarizer: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| r.system_text().contains("You compact the history"))
        .collect();
    assert_eq!(summarizer.len(), 1, "{stderr}");
    assert!(sent(summarizer[0], "Garden 2:"), "{:?}", summarizer[0].body);
    assert!(
        stderr.contains("[context compacted (summarize): messages 2–"),
        "{stderr}"
    );
    assert!(stderr.contains(" of 4,096 tokens]"), "{stderr}");

    // The next turn carries the summary instead of what it replaced; the first message stays.
    let after = requests
        .iter()
        .find(|r| r.last_user_text().as_deref() == Some("Which gardens do you know?"))
        .unwrap();
    assert!(sent(after, SUMMARY), "{:?}", after.body);
    assert!(sent(after, "Garden 1:"), "{:?}", after.body);
    assert!(!sent(after, "Garden 2:"), "{:?}", after.body);

    // /model: an unknown provider is named with the configured ones; a known one is taken.
    assert!(
        stderr.contains("error: no provider `nosuch`; configured: main"),
        "{stderr}"
    );
    assert!(stderr.contains("[model: main (mock-model)]"), "{stderr}");

    // /new: a new session whose first request holds the system prompt and the new message.
    let sessions: Vec<&str> = stderr
        .lines()
        .filter_map(|l| {
            l.strip_prefix("[session ")
                .or_else(|| l.strip_prefix("[new session "))
        })
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(sessions.len(), 2, "{stderr}");
    assert_ne!(sessions[0], sessions[1]);
    let last = requests.last().unwrap();
    assert_eq!(last.last_user_text().as_deref(), Some("fresh start"));
    assert_eq!(last.message_count(), 2, "{:?}", last.body);
    assert_eq!(last.messages()[0]["role"], "system");
    assert!(!sent(last, "Garden"), "{:?}", last.body);

    // The first session's transcript keeps every message and shows the compaction in place.
    let out = reef(&home)
        .args(["sessions", "show", sessions[0], "--json"])
        .assert()
        .success();
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(doc["messages"].as_array().unwrap().len(), 8, "{doc}");
    let compactions = doc["compactions"].as_array().unwrap();
    assert_eq!(compactions.len(), 1, "{doc}");
    let c = &compactions[0];
    assert_eq!(
        (&c["strategy"], &c["trigger"], &c["summary"], &c["window"]),
        (
            &json!("summarize"),
            &json!("manual"),
            &json!(SUMMARY),
            &json!(4096)
        )
    );
    assert_eq!(c["from_seq"], 2);
    assert_eq!(c["after_seq"], 6, "recorded after the third answer");
    let out = reef(&home)
        .args(["sessions", "show", sessions[0]])
        .assert()
        .success();
    let shown = text(&out.get_output().stdout);
    let compaction = shown
        .find("── context compacted (summarize): messages 2–")
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(shown[compaction..].contains("(asked for)"), "{shown}");
    assert!(
        shown[compaction..].contains(&format!("\n     {SUMMARY}\n")),
        "{shown}"
    );
    // In its place: after the third answer, before the question that followed.
    let question = shown.find("Which gardens do you know?").unwrap();
    let third = shown.find("Garden 3:").unwrap();
    assert!(third < compaction && compaction < question, "{shown}");
}

/// A daemon home whose agents run on `mock`, with a window so large that nothing compacts on
/// its own, and tools in the default sandbox (required).
pub(crate) fn roomy_daemon_home(mock: &MockLlm) -> TestHome {
    let home = TestHome::new();
    home.write_config(&format!(
        "[providers.main]\nbase_url = \"{}\"\nmodel = \"mock-model\"\nstream = false\n\
         max_retries = 0\ncontext_tokens = 100000\n\n[agent]\nkeep_recent_turns = 1\n\n\
         [daemon]\nlisten = \"127.0.0.1:0\"\n\n[sandbox]\nrequired = true\n",
        mock.base_url()
    ));
    home
}

/// Sends `text` to agent `w` and waits until it has finished `turns` turns in all.
async fn converse(d: &Daemon, text: &str, turns: usize) {
    d.post("/v1/agents/w/messages", json!({ "text": text }))
        .await;
    d.wait(
        &format!("turn {turns}"),
        "/v1/events?agent=w&kind=turn.ended",
        |e| e.as_array().is_some_and(|a| a.len() >= turns),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_compact_and_reset_work_through_the_daemon() {
    let mock = MockLlm::start_responder_blocking(Arc::new(gardener));
    let home = roomy_daemon_home(&mock);
    let d = Daemon::start(&home).await;
    d.post("/v1/agents", json!({"name": "w", "template": "worker"}))
        .await;
    for n in 1..=3 {
        converse(&d, &garden(n), n as usize).await;
    }
    assert!(
        mock.requests()
            .iter()
            .all(|r| !r.system_text().contains("You compact the history")),
        "nothing compacted on its own"
    );

    let out = reef(&home)
        .args(["agent", "compact", "w"])
        .assert()
        .success();
    let stdout = text(&out.get_output().stdout);
    assert!(
        stdout.starts_with("w: context compacted (summarize): messages 2–"),
        "{stdout}"
    );
    assert!(stdout.contains("of 100,000 tokens"), "{stdout}");
    assert!(
        stdout.contains(&format!("summary:\n  {SUMMARY}")),
        "{stdout}"
    );
    let summarizer = mock
        .requests()
        .into_iter()
        .find(|r| r.system_text().contains("You compact the history"))
        .unwrap();
    assert!(sent(&summarizer, "Garden 2:"), "{:?}", summarizer.body);

    // Right after, only the first message and the kept turn are left.
    let out = reef(&home).args(["agent", "compact", "w"]).assert().code(1);
    let stderr = text(&out.get_output().stderr);
    assert!(
        stderr.contains("cannot compact agent `w`: nothing to compact"),
        "{stderr}"
    );

    let out = reef(&home).args(["agent", "logs", "w"]).assert().success();
    let logs = text(&out.get_output().stdout);
    let line = logs
        .lines()
        .find(|l| l.contains("session.compacted"))
        .unwrap_or_else(|| panic!("{logs}"));
    assert!(
        line.contains("context compacted (summarize): messages 2–")
            && line.contains("(manual)")
            && line.contains(SUMMARY),
        "{line}"
    );

    let before = d.get("/v1/agents/w").await["session"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = reef(&home).args(["agent", "reset", "w"]).assert().success();
    let stdout = text(&out.get_output().stdout);
    let session = stdout
        .trim()
        .strip_prefix("w: new session ")
        .unwrap_or_else(|| panic!("{stdout}"))
        .to_owned();
    assert_ne!(session, before);
    assert_eq!(d.get("/v1/agents/w").await["session"], session.as_str());

    converse(&d, "after the reset", 4).await;
    let last = mock.requests().pop().unwrap();
    assert!(
        last.last_user_text()
            .is_some_and(|t| t.contains("after the reset")),
        "{:?}",
        last.body
    );
    assert_eq!(last.message_count(), 2, "{:?}", last.body);
    assert!(
        !sent(&last, "Garden") && !sent(&last, SUMMARY),
        "{:?}",
        last.body
    );
    let out = reef(&home).args(["agent", "logs", "w"]).assert().success();
    let logs = text(&out.get_output().stdout);
    assert!(
        logs.lines()
            .any(|l| l.contains("session.reset") && l.ends_with(&format!("session {session}"))),
        "{logs}"
    );

    let out = reef(&home)
        .args(["agent", "compact", "nosuch"])
        .assert()
        .code(2);
    let stderr = text(&out.get_output().stderr);
    assert!(stderr.contains("no agent named `nosuch`"), "{stderr}");
}
