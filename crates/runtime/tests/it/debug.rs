//! Step-through debugging: an operator's breakpoint pauses a daemon agent before a tool call
//! or a model request; the pause is a pending item; step, continue, skip, edit and inspect
//! decide what happens next, and the model and the sandbox see exactly that.

use crate::daemon::{count, daemon, spawn, wait_for};
use reef_runtime::{Breakpoint, DebugCommand, DebugStatus, Runtime, RuntimeError, Sender};
use reef_store::{PendingKind, PendingStatus};
use reef_test_support::{MockReply, RecordedRequest, Responder};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A model that runs `command` in the shell, then reports the tool's result.
fn runs(command: &'static str) -> Responder {
    Arc::new(move |r: &RecordedRequest| {
        if r.ends_with_tool_result() {
            MockReply::text(format!("result: {}", r.tool_results().join(" | ")))
        } else {
            MockReply::tool_call("shell", json!({ "command": command }))
        }
    })
}

/// Waits until the agent is paused at a breakpoint and returns its status.
async fn paused(rt: &Runtime, agent: &str) -> DebugStatus {
    for _ in 0..100 {
        let status = rt.debug_wait(agent, Duration::from_secs(5)).await.unwrap();
        if status.paused.is_some() {
            return status;
        }
    }
    panic!("agent {agent} never paused");
}

async fn started(rt: &Runtime, name: &str, breaks: &[&str]) -> PathBuf {
    let agent = rt
        .spawn_agent(spawn(name, "worker"), None)
        .await
        .unwrap()
        .agent;
    let breakpoints = breaks
        .iter()
        .map(|b| Breakpoint::parse(b).unwrap())
        .collect();
    let status = rt.debug_set(name, breakpoints).await.unwrap();
    assert_eq!(status.breakpoints, breaks);
    rt.send_message(name, Sender::Operator, "make the file", "k1", None)
        .await
        .unwrap();
    PathBuf::from(agent.workspace)
}

/// The shell arguments stored in the assistant message of a request.
fn sent_arguments(request: &RecordedRequest) -> Vec<Value> {
    request
        .messages()
        .iter()
        .filter_map(|m| m.get("tool_calls"))
        .flat_map(|calls| calls.as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["function"]["arguments"].as_str().map(str::to_owned))
        .map(|a| serde_json::from_str(&a).unwrap())
        .collect()
}

#[tokio::test]
async fn a_breakpoint_before_shell_lets_the_operator_edit_the_command_and_step() {
    let d = daemon(runs("printf original > ran.txt; cat ran.txt"), "").await;
    let rt = &d.runtime;
    let workspace = started(rt, "dbg", &["tool=shell"]).await;

    let status = paused(rt, "dbg").await;
    let stop = status.paused.clone().unwrap();
    assert_eq!(stop.at, "tool_call");
    assert_eq!(stop.tool.as_deref(), Some("shell"));
    assert_eq!(
        stop.arguments,
        Some(json!({"command": "printf original > ran.txt; cat ran.txt"}))
    );
    assert!(stop.context_tokens > 0 && stop.window.is_some(), "{stop:?}");
    assert!(
        !workspace.join("ran.txt").exists(),
        "the call ran before the operator let it"
    );
    // The stop is a pending item every front end sees.
    let items = rt.list_pending(false).await.unwrap();
    let item = items.iter().find(|i| i.id == stop.id).unwrap();
    assert_eq!(item.kind, PendingKind::Breakpoint);
    assert_eq!(item.payload["stop"]["tool"], "shell");

    let edited = json!({"command": "printf edited > ran.txt; cat ran.txt"});
    let status = rt
        .debug_command(
            "dbg",
            DebugCommand::Edit {
                arguments: edited.clone(),
            },
            Some(&stop.id),
        )
        .await
        .unwrap();
    let stop = status.paused.unwrap();
    assert!(stop.edited);
    assert_eq!(stop.arguments, Some(edited.clone()));
    let inspected = rt
        .debug_command("dbg", DebugCommand::Inspect, None)
        .await
        .unwrap();
    let context = inspected.paused.unwrap().context.unwrap();
    assert!(
        context
            .iter()
            .any(|m| serde_json::to_string(m).unwrap().contains("make the file")),
        "{context:?}"
    );

    // Step: the edited call runs, and the turn stops again before its next model request.
    let status = rt
        .debug_command("dbg", DebugCommand::Step, None)
        .await
        .unwrap();
    assert!(status.stepping);
    let next = paused(rt, "dbg").await.paused.unwrap();
    assert_eq!(next.at, "model_request");
    assert_eq!(next.round, 2);
    assert_eq!(
        std::fs::read_to_string(workspace.join("ran.txt")).unwrap(),
        "edited"
    );
    assert_eq!(
        d.mock.requests().len(),
        1,
        "the request went out during the pause"
    );

    rt.debug_command("dbg", DebugCommand::Continue, None)
        .await
        .unwrap();
    wait_for(rt, "the turn to end", |e| count(e, "turn.ended") == 1).await;
    let requests = d.mock.requests();
    assert_eq!(requests.len(), 2);
    // The model sees the call as it ran, and its result.
    assert_eq!(sent_arguments(&requests[1]), vec![edited]);
    let results = requests[1].tool_results();
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("stdout:\nedited\n"), "{results:?}");
    let answers: Vec<String> = rt
        .list_pending(true)
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.kind == PendingKind::Breakpoint)
        .map(|i| {
            assert_eq!(i.status, PendingStatus::Answered);
            i.answer.unwrap()
        })
        .collect();
    assert_eq!(
        answers,
        vec![
            r#"step with arguments {"command":"printf edited > ran.txt; cat ran.txt"}"#.to_owned(),
            "continue".to_owned()
        ]
    );
    // Nothing waits now: a debug command says so.
    let err = rt
        .debug_command("dbg", DebugCommand::Step, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RuntimeError::Conflict(m) if m.contains("not paused at a breakpoint")),
        "{err}"
    );
}

#[tokio::test]
async fn skip_answers_the_call_with_the_operators_error_and_nothing_runs() {
    let d = daemon(runs("touch should-not-exist"), "").await;
    let rt = &d.runtime;
    let workspace = started(rt, "skipper", &["tool"]).await;
    let stop = paused(rt, "skipper").await.paused.unwrap();
    // Driven through the pending item, as any front end can.
    rt.answer(&stop.id, "skip the operator forbids touching files")
        .await
        .unwrap();
    wait_for(rt, "the turn to end", |e| count(e, "turn.ended") == 1).await;
    assert!(!workspace.join("should-not-exist").exists());
    let requests = d.mock.requests();
    assert_eq!(
        requests[1].tool_results(),
        vec!["the operator forbids touching files".to_owned()]
    );
    let item = rt.get_pending(&stop.id).await.unwrap();
    assert_eq!(item.status, PendingStatus::Answered);
    assert_eq!(
        item.answer.as_deref(),
        Some("skip: the operator forbids touching files")
    );
    // Its answer is not news for the agent: the inbox got nothing from it.
    // (The message is finished after `turn.ended` is recorded.)
    let id = rt.get_agent("skipper").await.unwrap().id;
    let mut inbox = Vec::new();
    for _ in 0..2000 {
        inbox = rt
            .store()
            .inbox(&id, reef_store::InboxStatus::Done)
            .await
            .unwrap();
        if !inbox.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(inbox.len(), 1, "{inbox:?}");
}

#[tokio::test]
async fn a_round_breakpoint_holds_the_request_and_takes_no_edit() {
    let d = daemon(runs("true"), "").await;
    let rt = &d.runtime;
    started(rt, "rounds", &["round"]).await;
    let stop = paused(rt, "rounds").await.paused.unwrap();
    assert_eq!((stop.at, stop.round), ("model_request", 1));
    assert!(d.mock.requests().is_empty());
    // A command meant for another stop is refused, and this one still waits.
    let err = rt
        .debug_command(
            "rounds",
            DebugCommand::Continue,
            Some("bp_0000000000000000"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RuntimeError::Conflict(m) if m.contains("bp_0000000000000000")),
        "{err}"
    );
    assert!(rt.debug_status("rounds").await.unwrap().paused.is_some());
    for command in [
        DebugCommand::Skip { error: "no".into() },
        DebugCommand::Edit {
            arguments: json!({}),
        },
    ] {
        let err = rt.debug_command("rounds", command, None).await.unwrap_err();
        assert!(
            matches!(&err, RuntimeError::Invalid { field, .. } if field == "command"),
            "{err}"
        );
    }
    // Clearing the breakpoints ends debugging: the paused turn goes on and finishes.
    let status = rt.debug_set("rounds", Vec::new()).await.unwrap();
    assert!(status.breakpoints.is_empty() && status.paused.is_none());
    wait_for(rt, "the turn to end", |e| count(e, "turn.ended") == 1).await;
    assert_eq!(d.mock.requests().len(), 2);
}

#[tokio::test]
async fn stopping_a_paused_agent_withdraws_its_breakpoint() {
    let d = daemon(runs("true"), "").await;
    let rt = &d.runtime;
    started(rt, "halted", &["tool=shell"]).await;
    let stop = paused(rt, "halted").await.paused.unwrap();
    rt.stop_agent("halted", "operator").await.unwrap();
    let mut item = rt.get_pending(&stop.id).await.unwrap();
    for _ in 0..500 {
        if item.status != PendingStatus::Pending {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        item = rt.get_pending(&stop.id).await.unwrap();
    }
    assert_eq!(item.status, PendingStatus::Cancelled);
    assert!(rt.debug_status("halted").await.unwrap().paused.is_none());
    let err = rt
        .debug_command("halted", DebugCommand::Continue, None)
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::Conflict(_)), "{err}");
}
