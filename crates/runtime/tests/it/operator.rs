//! The operator command set run against a live runtime: every command does what it says,
//! checked through the runtime's own API, and bad lines get one line naming the usage.

use crate::daemon::{daemon_with, wait_for};
use reef_core::AgentState;
use reef_test_support::{MockReply, Responder};
use std::sync::Arc;

fn replies_done() -> Responder {
    Arc::new(|req| {
        let system = req.system_text();
        if system.contains("PIRATE") {
            MockReply::text("arr, done")
        } else {
            MockReply::text("done")
        }
    })
}

#[tokio::test]
async fn every_operator_command_does_what_it_says() {
    // A second provider for `model`.
    let d = daemon_with(
        replies_done(),
        "",
        "[model]\ndefault = \"mock\"\n\n\
         [providers.backup]\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"b\"\n",
    )
    .await;
    let rt = &d.runtime;
    let op = "alice!a@127.0.0.1";

    let reply = rt
        .operate("invoke ada coder write a haiku about reefs", op)
        .await;
    assert!(reply.ok, "{reply:?}");
    assert!(
        reply.lines[0].contains("template coder, task queued"),
        "{reply:?}"
    );
    let ada = rt.get_agent("ada").await.unwrap();
    assert_eq!(ada.template, "coder");
    wait_for(rt, "ada's first turn", |events| {
        events.iter().any(|e| e.kind == "turn.ended")
    })
    .await;
    let sent = d.mock.requests();
    assert!(
        sent.last()
            .unwrap()
            .last_user_text()
            .unwrap()
            .contains("write a haiku about reefs")
    );

    // Without a template word, the whole rest is the task and the default template is used.
    let reply = rt.operate("invoke bea tidy the notes", op).await;
    assert!(reply.lines[0].contains("template worker"), "{reply:?}");

    let list = rt.operate("list", op).await;
    assert!(list.ok);
    assert_eq!(list.lines[0], "2 agents");
    assert!(
        list.lines
            .iter()
            .any(|l| l.contains("ada") && l.contains("bea")),
        "{list:?}"
    );

    let status = rt.operate("status", op).await;
    assert!(status.ok, "{status:?}");
    let text = status.lines.join("\n");
    for part in [
        "2 agents",
        "up ",
        "turns:",
        "messages waiting",
        "model mock (m)",
        "today:",
        "tokens",
        "memory",
        "store",
    ] {
        assert!(text.contains(part), "status lacks {part:?}:\n{text}");
    }
    let one = rt.operate("status ada", op).await;
    assert!(
        one.lines[0].starts_with("ada: running · template coder · model mock"),
        "{one:?}"
    );

    let logs = rt.operate("logs ada 5", op).await;
    assert!(logs.ok);
    assert!(logs.lines.len() <= 5 && !logs.lines.is_empty(), "{logs:?}");
    assert!(
        logs.lines
            .iter()
            .any(|l| l.contains("turn.ended completed: done")),
        "{logs:?}"
    );

    let model = rt.operate("model ada backup", op).await;
    assert!(model.ok, "{model:?}");
    assert_eq!(
        rt.get_agent("ada").await.unwrap().model.as_deref(),
        Some("backup")
    );
    let models = rt.operate("models", op).await;
    assert!(
        models.lines.iter().any(|l| l.starts_with("backup: b")),
        "{models:?}"
    );
    let templates = rt.operate("templates", op).await;
    assert!(
        templates.lines.iter().any(|l| l.starts_with("coder: ")),
        "{templates:?}"
    );

    let persona = rt.operate("persona bea You are a PIRATE.", op).await;
    assert!(persona.ok, "{persona:?}");
    assert_eq!(
        rt.get_agent("bea").await.unwrap().persona,
        "You are a PIRATE."
    );

    let paused = rt.operate("pause bea", op).await;
    assert!(paused.ok, "{paused:?}");
    assert_eq!(rt.get_agent("bea").await.unwrap().state, AgentState::Paused);
    let resumed = rt.operate("resume bea", op).await;
    assert!(resumed.ok, "{resumed:?}");
    assert_eq!(
        rt.get_agent("bea").await.unwrap().state,
        AgentState::Running
    );

    let questions = rt.operate("questions", op).await;
    assert_eq!(questions.lines, ["nothing is waiting for an answer"]);

    let destroyed = rt.operate("destroy bea", op).await;
    assert!(destroyed.ok, "{destroyed:?}");
    assert!(rt.get_agent("bea").await.is_err());

    // Every command is an event naming who ran it.
    let events = rt.store().events_after(0, None, 10_000).await.unwrap();
    let ran: Vec<&str> = events
        .iter()
        .filter(|e| e.kind == "operator.command" && e.data["by"] == op)
        .filter_map(|e| e.data["command"].as_str())
        .collect();
    assert!(
        ran.starts_with(&["invoke", "invoke", "list", "status"]),
        "{ran:?}"
    );
    assert!(ran.contains(&"destroy"));
}

#[tokio::test]
async fn bad_lines_get_one_line_naming_the_usage() {
    let d = daemon_with(replies_done(), "", "").await;
    let rt = &d.runtime;
    for (line, expected) in [
        ("frobnicate", "unknown command"),
        ("destroy", "usage: destroy NAME [--purge]"),
        ("logs ada many", "logs"),
        ("status nobody", "no agent named `nobody`"),
        ("model nobody mock", "no agent named `nobody`"),
        ("invoke Bad!Name", "name"),
        ("answer q_missing yes", "answer:"),
        ("help frobnicate", "unknown command `frobnicate`"),
    ] {
        let reply = rt.operate(line, "alice").await;
        assert!(!reply.ok, "{line}: {reply:?}");
        assert_eq!(reply.lines.len(), 1, "{line}: {reply:?}");
        assert!(
            reply.lines[0].contains(expected),
            "{line}: {:?}",
            reply.lines[0]
        );
    }
    let help = rt.operate("help", "alice").await;
    assert!(help.ok);
    assert_eq!(help.lines.len(), 1 + reef_runtime::operator::COMMANDS.len());
    let one = rt.operate("help invoke", "alice").await;
    assert!(
        one.lines[0].starts_with("invoke NAME [TEMPLATE] [task…]"),
        "{one:?}"
    );
}
