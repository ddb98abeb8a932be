//! Messages: exact round-trips, seq assignment under concurrency, titles, corrupt rows.

use crate::new_session;
use reef_core::{Message, SessionId, ToolCall, ToolCallId};
use reef_store::StoreError;
use std::collections::BTreeSet;

fn every_variant() -> Vec<Message> {
    vec![
        Message::system("you are reef"),
        Message::user("list files\nplease"),
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![
                ToolCall {
                    id: ToolCallId::from("call_1"),
                    name: "shell".into(),
                    arguments: r#"{"cmd":"ls -la"}"#.into(),
                },
                ToolCall {
                    id: ToolCallId::from("call_2"),
                    name: "read".into(),
                    // Malformed JSON must be kept verbatim.
                    arguments: r#"{"path": "a.txt""#.into(),
                },
            ],
        },
        Message::Tool {
            call_id: ToolCallId::from("call_1"),
            name: "shell".into(),
            content: "a.txt\nb.txt".into(),
            is_error: false,
        },
        Message::Tool {
            call_id: ToolCallId::from("call_2"),
            name: "read".into(),
            content: "invalid arguments".into(),
            is_error: true,
        },
        Message::Assistant {
            content: "done ✓".into(),
            tool_calls: vec![],
        },
    ]
}

both! {
    async fn every_variant_round_trips(store) {
        let id = crate::session_in(store, "ses_rt").await;
        let sent = every_variant();
        for (i, m) in sent.iter().enumerate() {
            let stored = store.append_message(&id, m).await.unwrap();
            assert_eq!(stored.seq, i as u64 + 1);
            assert_eq!(&stored.message, m);
            assert_eq!(stored.created_at.len(), "2025-01-01T00:00:00.000Z".len());
            assert!(stored.created_at.ends_with('Z'));
        }
        let back: Vec<Message> = store
            .messages(&id)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.message)
            .collect();
        assert_eq!(back, sent);
    }
}

both! {
async fn concurrent_appends_get_distinct_seqs(store) {
    let id = crate::session_in(store, "ses_conc").await;
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = store.clone();
            let id = id.clone();
            tokio::spawn(async move {
                store
                    .append_message(&id, &Message::user(format!("m{i}")))
                    .await
                    .unwrap()
                    .seq
            })
        })
        .collect();
    let mut seqs = BTreeSet::new();
    for t in tasks {
        assert!(seqs.insert(t.await.unwrap()));
    }
    assert_eq!(seqs, (1..=20).collect());
    let stored = store.messages(&id).await.unwrap();
    assert_eq!(
        stored.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=20).collect::<Vec<_>>()
    );
}
}

both! {
    async fn title_comes_from_first_user_message(store) {
        let id = crate::session_in(store, "ses_title").await;
        assert_eq!(store.get_session(&id).await.unwrap().unwrap().title, None);
        store
            .append_message(&id, &Message::system("system prompt"))
            .await
            .unwrap();
        assert_eq!(store.get_session(&id).await.unwrap().unwrap().title, None);

        let long = format!("Fix the  build\n{}", "x".repeat(200));
        store
            .append_message(&id, &Message::user(long))
            .await
            .unwrap();
        store
            .append_message(&id, &Message::user("second question"))
            .await
            .unwrap();
        let title = store
            .get_session(&id)
            .await
            .unwrap()
            .unwrap()
            .title
            .unwrap();
        assert_eq!(title.chars().count(), 80);
        assert!(title.starts_with("Fix the build xxx"), "{title}");
    }
}

both! {
    async fn append_bumps_updated_at(store) {
        let id = crate::session_in(store, "ses_bump").await;
        let before = store.get_session(&id).await.unwrap().unwrap();
        let stored = store
            .append_message(&id, &Message::user("hi"))
            .await
            .unwrap();
        let after = store.get_session(&id).await.unwrap().unwrap();
        assert_eq!(after.created_at, before.created_at);
        assert!(after.updated_at > before.updated_at);
        assert_eq!(after.updated_at, stored.created_at);
    }
}

both! {
    async fn unknown_session_is_not_found(store) {
        let missing = SessionId::from("ses_missing");
        let err = store
            .append_message(&missing, &Message::user("hi"))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
        assert!(matches!(
            store.messages(&missing).await,
            Err(StoreError::NotFound(_))
        ));
        assert!(store.get_session(&missing).await.unwrap().is_none());
    }
}

both! {
async fn undecodable_row_is_corrupt(place: Place) {
    let store = place.store().await;
    let id = store
        .create_session(new_session("ses_bad"))
        .await
        .unwrap()
        .id;
    store
        .append_message(&id, &Message::user("ok"))
        .await
        .unwrap();
    place
        .execute(
            "INSERT INTO messages (session_id, seq, role, content, tool_calls, is_error, created_at)
             VALUES ('ses_bad', 2, 'assistant', '', 'not json', FALSE, 'x')",
        )
        .await;
    let err = store.messages(&id).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
}
}
