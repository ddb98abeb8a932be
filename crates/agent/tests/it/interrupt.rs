//! Interrupting a turn kills its tools, and the next turn sends a valid, repaired history.

use crate::{eventually, options, processes_with, session, sleep_marker, until};
use reef_core::{EventMsg, Op, TurnOutcome};
use reef_store::Store;
use reef_test_support::{MockLlm, MockReply};
use serde_json::json;

#[tokio::test]
async fn interrupt_kills_the_running_tool_and_the_next_turn_is_repaired() {
    let marker = sleep_marker();
    let mock = MockLlm::start(vec![
        MockReply::tool_call(
            "shell",
            json!({"command": format!("sleep {marker} & echo $! > sleeper.pid; wait"),
                   "timeout_secs": 120}),
        ),
        MockReply::text("fine, moving on"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory().unwrap();
    let mut handle = reef_agent::spawn(session(&mock, &store, options(dir.path())).await);

    handle.submit(Op::UserInput {
        text: "sleep for a minute".into(),
    });
    until(&mut handle, |m| matches!(m, EventMsg::ToolCallBegin { .. })).await;
    let pid_file = dir.path().join("sleeper.pid");
    assert!(
        eventually(|| std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))).await
    );
    assert!(eventually(|| !processes_with(&marker).is_empty()).await);

    handle.submit(Op::Interrupt);
    let events = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    let Some(EventMsg::TurnEnded {
        outcome, rounds, ..
    }) = events.last().map(|e| &e.msg)
    else {
        unreachable!()
    };
    assert_eq!(outcome, &TurnOutcome::Interrupted);
    assert_eq!(*rounds, 1);
    let gone = eventually(|| processes_with(&marker).is_empty()).await;
    assert!(gone, "the tool's process outlived the interrupt");

    handle.submit(Op::UserInput {
        text: "what happened?".into(),
    });
    let events = until(&mut handle, |m| matches!(m, EventMsg::TurnEnded { .. })).await;
    assert!(matches!(
        events.last().map(|e| &e.msg),
        Some(EventMsg::TurnEnded {
            outcome: TurnOutcome::Completed { .. },
            ..
        })
    ));
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let results = requests[1].tool_results();
    assert_eq!(results.len(), 1, "the dangling call got a stand-in result");
    assert!(results[0].contains("interrupted"), "{results:?}");
    assert_eq!(
        requests[1].last_user_text().as_deref(),
        Some("what happened?")
    );

    handle.submit(Op::Shutdown);
    until(&mut handle, |m| matches!(m, EventMsg::ShutdownComplete)).await;
    let session = handle.join().await.unwrap();
    // user, assistant(call), user, assistant: the stand-in result is not stored as if it ran.
    assert_eq!(store.messages(session.id()).await.unwrap().len(), 4);
}

#[tokio::test]
async fn interrupt_when_idle_is_a_warning() {
    let mock = MockLlm::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory().unwrap();
    let mut handle = reef_agent::spawn(session(&mock, &store, options(dir.path())).await);
    handle.submit(Op::Interrupt);
    let events = until(&mut handle, |m| matches!(m, EventMsg::Warning { .. })).await;
    assert_eq!(events.len(), 1);
    assert!(mock.requests().is_empty());
}
