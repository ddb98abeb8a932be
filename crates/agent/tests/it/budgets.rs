//! Wall-clock and round budgets, and the order of events in a turn.

use crate::{eventually, options, processes_with, session, sleep_marker, until};
use reef_core::{EventMsg, Op, TurnOutcome};
use reef_store::Store;
use reef_test_support::{MockLlm, MockReply};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn the_wall_clock_budget_ends_a_turn_and_kills_its_tools() {
    let marker = sleep_marker();
    let mock = MockLlm::start(vec![MockReply::tool_call(
        "shell",
        json!({"command": format!("sleep {marker} & echo $! > s.pid; wait"), "timeout_secs": 120}),
    )])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory().unwrap();
    let mut opts = options(dir.path());
    opts.max_wall = Duration::from_secs(5);
    let mut handle = reef_agent::spawn(session(&mock, &store, opts).await);
    handle.submit(Op::UserInput {
        text: "take your time".into(),
    });
    let events = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    assert!(matches!(
        events.last().map(|e| &e.msg),
        Some(EventMsg::TurnEnded {
            outcome: TurnOutcome::TimedOut { limit_secs: 5 },
            ..
        })
    ));
    assert!(dir.path().join("s.pid").exists(), "the tool started");
    let gone = eventually(|| processes_with(&marker).is_empty()).await;
    assert!(gone, "the tool's sleep survived the turn's budget");
}

#[tokio::test]
async fn events_of_a_turn_come_in_protocol_order() {
    let mock = MockLlm::start(vec![
        MockReply::TextWithToolCalls(
            "Looking around.".into(),
            vec![
                ("list_dir".into(), json!({})),
                (
                    "write_file".into(),
                    json!({"path": "x.txt", "content": "x"}),
                ),
            ],
        ),
        MockReply::text("All done."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory().unwrap();
    let mut handle = reef_agent::spawn(session(&mock, &store, options(dir.path())).await);
    let sub = handle.submit(Op::UserInput { text: "go".into() });
    let events = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    assert!(
        events.iter().all(|e| e.id == sub),
        "every event carries the submission id"
    );
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match &e.msg {
            EventMsg::TurnStarted { .. } => "start",
            EventMsg::ModelDelta { .. } => "delta",
            EventMsg::Usage { .. } => "usage",
            EventMsg::AssistantMessage { .. } => "assistant",
            EventMsg::ToolCallBegin { .. } => "begin",
            EventMsg::ToolCallEnd { .. } => "end",
            EventMsg::TurnEnded { .. } => "ended",
            _ => "other",
        })
        .filter(|k| *k != "delta")
        .collect();
    assert_eq!(
        kinds,
        [
            "start",
            "usage",
            "assistant",
            "begin",
            "begin",
            "end",
            "end",
            "usage",
            "assistant",
            "ended"
        ]
    );
    let Some(EventMsg::TurnEnded {
        outcome,
        rounds,
        usage,
    }) = events.last().map(|e| &e.msg)
    else {
        unreachable!()
    };
    assert_eq!(
        outcome,
        &TurnOutcome::Completed {
            text: "All done.".into()
        }
    );
    assert_eq!(*rounds, 2);
    let stored = store.usage_total(handle_session_id(&events)).await.unwrap();
    assert_eq!(
        &stored, usage,
        "usage in the event equals what the store recorded"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("x.txt")).unwrap(),
        "x"
    );
}

fn handle_session_id(events: &[reef_core::Event]) -> &reef_core::SessionId {
    events
        .iter()
        .find_map(|e| match &e.msg {
            EventMsg::TurnStarted { session_id } => Some(session_id),
            _ => None,
        })
        .unwrap()
}
