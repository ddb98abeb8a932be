//! Resuming a stored session continues its history; a transcript cut by a kill stays usable.

use crate::{options, session};
use reef_agent::Session;
use reef_core::{Message, ToolCall, ToolCallId, TurnOutcome};
use reef_store::Store;
use reef_test_support::{MockLlm, MockReply};
use std::sync::Arc;
use tokio::sync::mpsc;

#[tokio::test]
async fn a_resumed_session_sends_its_history_and_answers_dangling_calls() {
    let mock = MockLlm::start(vec![MockReply::text("first"), MockReply::text("second")]).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("reef.db")).unwrap();
    let mut first = session(&mock, &store, options(dir.path())).await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let outcome = first
        .run_turn("sub_1".into(), "hello".into(), tx.clone())
        .await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "first".into()
        }
    );
    let id = first.id().clone();

    // Simulate a process killed after the model asked for a tool and before it answered.
    store
        .append_message(
            &id,
            &Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: ToolCallId::from("call_cut"),
                    name: "shell".into(),
                    arguments: r#"{"command":"true"}"#.into(),
                }],
            },
        )
        .await
        .unwrap();
    drop(first);

    let reopened = Store::open(&dir.path().join("reef.db")).unwrap();
    let model = first_model(&mock);
    let tools = Arc::new(reef_tools::ToolRegistry::new());
    let mut resumed = Session::resume(id.clone(), model, tools, reopened, options(dir.path()))
        .await
        .unwrap();
    assert_eq!(resumed.history().len(), 3);
    let outcome = resumed.run_turn("sub_2".into(), "again".into(), tx).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "second".into()
        }
    );

    let request = &mock.requests()[1];
    let body = request.body.to_string();
    assert!(body.contains("hello") && body.contains("first"), "{body}");
    assert_eq!(request.tool_result_ids(), ["call_cut"]);
    assert!(request.tool_results()[0].contains("interrupted"));
}

#[tokio::test]
async fn resuming_an_unknown_session_is_an_error() {
    let mock = MockLlm::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_in_memory().unwrap();
    let err = Session::resume(
        "ses_nope".into(),
        first_model(&mock),
        Arc::new(reef_tools::ToolRegistry::new()),
        store,
        options(dir.path()),
    )
    .await
    .err()
    .unwrap();
    assert!(err.to_string().contains("ses_nope"), "{err}");
}

fn first_model(mock: &MockLlm) -> Arc<dyn reef_core::ModelClient> {
    reef_llm::build_client(reef_llm::ProviderSettings {
        base_url: mock.base_url(),
        max_retries: 0,
        ..reef_llm::ProviderSettings::default()
    })
    .unwrap()
}
