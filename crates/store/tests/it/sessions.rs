//! Sessions: listing order with counts and token sums, and id prefix resolution.

use crate::new_session;
use reef_core::{Message, SessionId, Usage};
use reef_store::{NewUsage, StoreError};

fn usage(input: u64, output: u64) -> NewUsage {
    NewUsage {
        provider: "openai".into(),
        model: "gpt-test".into(),
        usage: Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: 0,
        },
        round: 1,
        cost_micros: None,
    }
}

both! {
    async fn list_is_newest_first_with_counts_and_sums(store) {
        let a = store.create_session(new_session("ses_a")).await.unwrap().id;
        let b = store.create_session(new_session("ses_b")).await.unwrap().id;
        let c = store.create_session(new_session("ses_c")).await.unwrap().id;
        // Touch `a` last: it becomes the most recently updated.
        store
            .append_message(&b, &Message::user("b1"))
            .await
            .unwrap();
        store
            .append_message(&a, &Message::user("a1"))
            .await
            .unwrap();
        store
            .append_message(
                &a,
                &Message::Assistant {
                    content: "a2".into(),
                    tool_calls: vec![],
                },
            )
            .await
            .unwrap();
        store.record_usage(&a, &usage(100, 10)).await.unwrap();
        store.record_usage(&a, &usage(50, 5)).await.unwrap();

        let list = store.list_sessions(10).await.unwrap();
        let ids: Vec<_> = list.iter().map(|s| s.id.clone()).collect();
        assert_eq!(ids, [a.clone(), b.clone(), c.clone()]);
        assert_eq!(list[0].message_count, 2);
        assert_eq!((list[0].input_tokens, list[0].output_tokens), (150, 15));
        assert_eq!(list[0].title.as_deref(), Some("a1"));
        assert_eq!(list[1].message_count, 1);
        assert_eq!((list[1].input_tokens, list[1].output_tokens), (0, 0));
        assert_eq!(list[2].message_count, 0);
        assert_eq!(list[2].title, None);

        let top: Vec<_> = store.list_sessions(2).await.unwrap();
        assert_eq!(top.len(), 2);
        assert_eq!(top[0].id, a);
        assert!(store.list_sessions(0).await.unwrap().is_empty());
    }
}

both! {
    async fn summaries_serialize_to_json(store) {
        store.create_session(new_session("ses_json")).await.unwrap();
        let list = store.list_sessions(1).await.unwrap();
        let json = serde_json::to_value(&list).unwrap();
        assert_eq!(json[0]["id"], "ses_json");
        assert_eq!(json[0]["message_count"], 0);
    }
}

both! {
    async fn resolve_exact_unique_ambiguous_and_missing(store) {
        for id in ["ses_abc1", "ses_abc2", "ses_xyz", "ses_x"] {
            store.create_session(new_session(id)).await.unwrap();
        }
        // Exact match wins even though it is also a prefix of another id.
        assert_eq!(
            store.resolve_session("ses_x").await.unwrap(),
            SessionId::from("ses_x")
        );
        assert_eq!(
            store.resolve_session("ses_xy").await.unwrap(),
            SessionId::from("ses_xyz")
        );
        assert_eq!(
            store.resolve_session("ses_abc2").await.unwrap(),
            SessionId::from("ses_abc2")
        );
        match store.resolve_session("ses_ab").await.unwrap_err() {
            StoreError::Ambiguous { prefix, matches } => {
                assert_eq!(prefix, "ses_ab");
                assert_eq!(matches, 2);
            }
            other => panic!("expected Ambiguous, got {other:?}"),
        }
        let err = store.resolve_session("ses_q").await.unwrap_err();
        assert!(
            matches!(&err, StoreError::NotFound(m) if m.contains("ses_q")),
            "{err:?}"
        );
        // LIKE wildcards are literal.
        assert!(matches!(
            store.resolve_session("ses_%").await,
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.resolve_session("").await,
            Err(StoreError::NotFound(_))
        ));
    }
}

both! {
    async fn duplicate_session_id_is_an_error(store) {
        store.create_session(new_session("ses_dup")).await.unwrap();
        assert!(store.create_session(new_session("ses_dup")).await.is_err());
    }
}
