//! Session search: full-text search over the transcripts of one agent's sessions.

use reef_core::{Message, SessionId};
use reef_store::{Store, StoreError};

async fn session(store: &Store, id: &str, agent: &str, said: &[Message]) {
    let mut new = crate::new_session(id);
    new.agent = Some(agent.into());
    store.create_session(new).await.unwrap();
    for m in said {
        store.append_message(&SessionId::from(id), m).await.unwrap();
    }
}

both! {
    async fn finds_what_an_agent_said_in_past_sessions_and_only_its_own(store) {
        session(
            store,
            "s1",
            "alice",
            &[
                Message::user("What should we do about the flaky billing export?"),
                Message::Assistant {
                    content: "We decided to retry the billing export three times, then page.".into(),
                    tool_calls: Vec::new(),
                },
            ],
        )
        .await;
        session(
            store,
            "s2",
            "alice",
            &[Message::user("Book a table for Friday.")],
        )
        .await;
        session(
            store,
            "s3",
            "bob",
            &[Message::user("The billing export is bob's secret.")],
        )
        .await;

        let hits = store
            .search_sessions("alice", "decided billing exports", None, 10)
            .await
            .unwrap();
        assert_eq!(hits.len(), 2, "{hits:?}");
        assert!(hits.iter().all(|h| h.session_id == "s1"), "{hits:?}");
        assert_eq!(hits[0].role, "assistant", "matches more words, ranks first");
        assert!(hits[0].snippet.contains("[decided]"), "{}", hits[0].snippet);
        assert!(
            hits[0].snippet.contains("[export]"),
            "porter stems: {}",
            hits[0].snippet
        );

        let bob = store
            .search_sessions("bob", "billing", None, 10)
            .await
            .unwrap();
        assert_eq!(bob.len(), 1);
        assert_eq!(bob[0].session_id, "s3");
        assert!(
            store
                .search_sessions("carol", "billing", None, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let err = store
            .search_sessions("alice", "?!", None, 10)
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Invalid { field: "query", .. }),
            "{err}"
        );
    }
}

both! {
    async fn tool_results_are_found_with_the_tool_that_gave_them(store) {
        session(
            store,
            "s1",
            "alice",
            &[
                Message::user("Run the build."),
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![reef_core::ToolCall {
                        id: reef_core::ToolCallId::from("c1"),
                        name: "shell".into(),
                        arguments: "{\"command\":\"cargo build\"}".into(),
                    }],
                },
                Message::Tool {
                    call_id: reef_core::ToolCallId::from("c1"),
                    name: "shell".into(),
                    content: "error[E0308]: mismatched types in src/ledger.rs".into(),
                    is_error: true,
                },
            ],
        )
        .await;
        let hits = store
            .search_sessions(
                "alice",
                "what did the build say about mismatched types",
                None,
                10,
            )
            .await
            .unwrap();
        let tool = hits
            .iter()
            .find(|h| h.role == "tool")
            .unwrap_or_else(|| panic!("{hits:?}"));
        assert_eq!(tool.tool.as_deref(), Some("shell"));
        assert!(tool.snippet.contains("[mismatched]"), "{}", tool.snippet);
    }
}
