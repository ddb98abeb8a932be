//! The overseer in `#control`: operator commands end to end, refusals, announcements, and
//! the channel's state on the board.

use crate::support::daemon;
use reef_core::AgentState;
use reef_runtime::ChannelState;
use reef_test_support::{IrcLine, MockReply, Responder};
use serde_json::json;
use std::sync::Arc;

/// ada writes the haiku with a tool, then reports; anyone else says "done".
fn poet() -> Responder {
    Arc::new(|req| {
        if req.agent() == "ada" && req.last_user_text().is_some_and(|t| t.contains("haiku")) {
            if req.tool_results().is_empty() {
                return MockReply::tool_call(
                    "write_file",
                    json!({"path": "haiku.txt", "content": "reef of quiet light\nsmall fish write in coral code\ntides keep the commits\n"}),
                );
            }
            return MockReply::text("wrote haiku.txt: reef of quiet light");
        }
        MockReply::text("done")
    })
}

#[tokio::test]
async fn an_operator_runs_an_agent_from_control_and_each_command_does_what_it_says() {
    let d = daemon(poet(), "", "").await;
    let rt = &d.runtime;
    let mut alice = d.person("alice", &["#control", "#agents"]).await;

    alice
        .say(
            "#control",
            "!invoke ada coder write a haiku about reefs into haiku.txt",
        )
        .await;
    let invoked = alice.expect_message("overseer", "#control", "ada").await;
    assert!(
        invoked.contains("ada is running (template coder, task queued)"),
        "{invoked}"
    );
    alice
        .expect(|l| {
            l.command == "JOIN" && l.nick.as_deref() == Some("ada") && l.params[0] == "#agents"
        })
        .await;
    let report = alice
        .expect_message("ada", "#agents", "wrote haiku.txt")
        .await;
    assert_eq!(report, "wrote haiku.txt: reef of quiet light");
    let ada = rt.get_agent("ada").await.unwrap();
    let haiku =
        std::fs::read_to_string(std::path::Path::new(&ada.workspace).join("haiku.txt")).unwrap();
    assert!(haiku.starts_with("reef of quiet light"));
    // The model was sent the task as the operator wrote it.
    let task = d.mock.requests()[0].last_user_text().unwrap();
    assert!(
        task.contains("write a haiku about reefs into haiku.txt"),
        "{task}"
    );

    alice.say("#control", "!list").await;
    let list = alice
        .expect_message("overseer", "#control", "running (1): ada")
        .await;
    assert_eq!(list, "running (1): ada");

    alice.say("#control", "!status").await;
    alice
        .expect_message("overseer", "#control", "1 agents: 1 running")
        .await;
    alice.expect_message("overseer", "#control", "today:").await;

    alice.say("#control", "!logs ada 5").await;
    alice
        .expect_message(
            "overseer",
            "#control",
            "turn.ended completed: wrote haiku.txt",
        )
        .await;

    alice.say("#control", "!model ada backup").await;
    alice
        .expect_message("overseer", "#control", "ada now uses backup")
        .await;
    assert_eq!(
        rt.get_agent("ada").await.unwrap().model.as_deref(),
        Some("backup")
    );

    alice
        .say("#control", "!persona ada You answer in one line.")
        .await;
    alice
        .expect_message("overseer", "#control", "ada has a new persona")
        .await;
    assert_eq!(
        rt.get_agent("ada").await.unwrap().persona,
        "You answer in one line."
    );

    alice.say("#control", "!pause ada").await;
    alice
        .expect_message("overseer", "#control", "ada is paused")
        .await;
    assert_eq!(rt.get_agent("ada").await.unwrap().state, AgentState::Paused);
    alice.say("#control", "!resume ada").await;
    alice
        .expect_message("overseer", "#control", "ada is running")
        .await;
    assert_eq!(
        rt.get_agent("ada").await.unwrap().state,
        AgentState::Running
    );

    // Someone who is not an operator is refused, and the attempt is an event.
    let mut mallory = d.person("mallory", &["#control"]).await;
    mallory.say("#control", "!destroy ada").await;
    let refusal = mallory
        .expect_message("overseer", "#control", "mallory")
        .await;
    assert_eq!(refusal, "mallory: only operators may run commands here");
    let refused = d.wait_event("operator.refused", |_| true).await;
    assert!(
        refused.data["identity"]
            .as_str()
            .unwrap()
            .starts_with("mallory!")
    );
    assert_eq!(refused.data["command"], "destroy");
    assert!(rt.get_agent("ada").await.is_ok());

    // Bad input gets one line naming the usage.
    alice.say("#control", "!destroy").await;
    alice
        .expect_message("overseer", "#control", "usage: destroy NAME [--purge]")
        .await;
    alice.say("#control", "!frobnicate").await;
    alice
        .expect_message("overseer", "#control", "unknown command")
        .await;

    alice.say("#control", "!destroy ada").await;
    // ada's QUIT and the overseer's answer come from two connections, in either order.
    let destroyed = |l: &IrcLine| {
        l.nick.as_deref() == Some("overseer")
            && l.privmsg()
                .is_some_and(|(to, text)| to == "#control" && text.contains("ada is destroyed"))
    };
    let quit = |l: &IrcLine| l.command == "QUIT" && l.nick.as_deref() == Some("ada");
    alice.expect_each(&[&destroyed, &quit]).await;
    assert!(rt.get_agent("ada").await.is_err());
}

#[tokio::test]
async fn questions_and_stops_are_announced_in_control_and_answered_from_there() {
    let asker: Responder = Arc::new(|req| {
        if req.tool_results().is_empty() {
            MockReply::tool_call("ask_operator", json!({"question": "Which branch?"}))
        } else {
            MockReply::text("asked")
        }
    });
    let d = daemon(asker, "", "").await;
    let mut alice = d.person("alice", &["#control"]).await;
    alice
        .say("#control", "!invoke cy worker pick a branch")
        .await;
    let asked = alice
        .expect_message("overseer", "#control", "cy asks (")
        .await;
    let id = asked.split(['(', ')']).nth(1).unwrap().to_owned();
    assert!(asked.ends_with(&format!("— !answer {id} TEXT")), "{asked}");
    alice.say("#control", &format!("!answer {id} main")).await;
    alice
        .expect_message("overseer", "#control", "is answered")
        .await;
    let item = d.runtime.get_pending(&id).await.unwrap();
    assert_eq!(item.answer.as_deref(), Some("main"));

    d.runtime.stop_agent("cy", "over budget").await.unwrap();
    let stopped = alice
        .expect_message("overseer", "#control", "cy terminated")
        .await;
    assert_eq!(stopped, "cy terminated: over budget");
}

#[tokio::test]
async fn a_channel_that_cannot_connect_says_why_and_the_daemon_serves_on() {
    let d = daemon(Arc::new(|_| MockReply::text("done")), "", "").await;
    let mut ircd = d.ircd;
    ircd.kill();
    // The channel notices, reports down with the reason and the next attempt.
    let down = loop {
        let status = d.runtime.channels().into_iter().find(|c| c.name == "irc");
        if let Some(status) = status
            && status.state == ChannelState::Down
            && status.failures >= 2
        {
            break status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(
        down.error.as_deref().unwrap().contains("cannot connect"),
        "{down:?}"
    );
    assert!(down.next_attempt_unix.is_some());
    let event = d
        .runtime
        .store()
        .events_after(0, None, 10_000)
        .await
        .unwrap();
    assert!(event.iter().any(|e| e.kind == "channel.down"));
    // Everything else still works.
    let reply = d.runtime.operate("list", "test").await;
    assert!(reply.ok);
}

#[tokio::test]
async fn the_scheduler_speaks_in_the_rooms_reports_findings_and_disabled_routines() {
    let d = daemon(
        Arc::new(|req| {
            let text = req.last_user_text().unwrap_or_default();
            if text.contains("[heartbeat") {
                MockReply::text("backup disk is full")
            } else {
                MockReply::text("all backups verified")
            }
        }),
        "",
        "[heartbeat]\nevery = \"1h\"\nagents = [\"keeper\"]\n",
    )
    .await;
    let rt = &d.runtime;
    let mut alice = d.person("alice", &["#control", "#agents"]).await;

    // A spawned run's answer is its report in the agents' room.
    let spec = |action| reef_core::RoutineSpec {
        trigger: reef_core::Trigger::Manual,
        action,
        guardrails: reef_core::Guardrails {
            max_failures: 1,
            ..reef_core::Guardrails::default()
        },
    };
    let request = |name: &str, action| reef_runtime::RoutineRequest {
        name: name.into(),
        spec: spec(action),
        enabled: true,
    };
    rt.create_routine(
        request(
            "backups",
            reef_core::Action::Spawn {
                template: "worker".into(),
                task: "verify the backups".into(),
                timeout_secs: 300,
            },
        ),
        None,
    )
    .await
    .unwrap();
    rt.run_routine("backups").await.unwrap();
    let report = alice
        .expect_message("overseer", "#agents", "(routine backups)")
        .await;
    assert!(
        report.ends_with("(routine backups): all backups verified"),
        "{report}"
    );

    // A routine whose agent is gone fails once and is disabled: the operator is told.
    rt.spawn_agent(crate::support::spawn("temp"), None)
        .await
        .unwrap();
    rt.create_routine(
        request(
            "ping",
            reef_core::Action::Message {
                agent: "temp".into(),
                text: "ping".into(),
            },
        ),
        None,
    )
    .await
    .unwrap();
    rt.destroy_agent("temp", false).await.unwrap();
    rt.run_routine("ping").await.unwrap();
    let disabled = alice
        .expect_message("overseer", "#control", "routine ping is disabled")
        .await;
    assert!(
        disabled.contains("agent `temp` does not exist"),
        "{disabled}"
    );

    // A heartbeat's finding, for an agent with no parent, goes to the control room.
    let keeper = rt
        .spawn_agent(crate::support::spawn("keeper"), None)
        .await
        .unwrap()
        .agent;
    std::fs::write(
        std::path::Path::new(&keeper.workspace).join("HEARTBEAT.md"),
        "- is the backup disk full?\n",
    )
    .unwrap();
    rt.run_routine("heartbeat-keeper").await.unwrap();
    let finding = alice
        .expect_message("overseer", "#control", "(heartbeat)")
        .await;
    assert_eq!(finding, "keeper (heartbeat): backup disk is full");
}
