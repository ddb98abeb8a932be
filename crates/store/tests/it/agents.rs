//! Agents, inboxes and the event history.

use reef_core::{AgentId, AgentState, Budget, Capabilities};
use reef_store::{InboxStatus, NewAgent, StoreError};

pub fn new_agent(name: &str) -> NewAgent {
    NewAgent {
        id: AgentId::new(),
        name: name.into(),
        template: "worker".into(),
        persona: "You do one task well.".into(),
        model: None,
        workspace: format!("/reef/agents/{name}/workspace"),
        capabilities: Capabilities::default(),
        budget: Budget {
            tokens: Some(10_000),
            ..Budget::default()
        },
        parent: None,
        ephemeral: false,
    }
}

both! {
async fn agents_are_created_once_per_name_and_survive_a_reopen(place: Place) {
    let store = place.store().await;
    let manager = store.create_agent(new_agent("manager")).await.unwrap();
    assert_eq!(manager.state, AgentState::Pending);
    let mut child = new_agent("worker-1");
    child.parent = Some(manager.id.clone());
    let child = store.create_agent(child).await.unwrap();

    let err = store.create_agent(new_agent("manager")).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert!(
        err.to_string().contains("`manager` already exists"),
        "{err}"
    );
    drop(store);

    let store = place.store().await;
    let listed = store.list_agents().await.unwrap();
    assert_eq!(listed, [manager.clone(), child.clone()]);
    let by_name = store.agent_by_name("worker-1").await.unwrap().unwrap();
    assert_eq!(by_name.parent, Some(manager.id.clone()));
    assert_eq!(by_name.budget.tokens, Some(10_000));
    assert_eq!(store.get_agent(&AgentId::new()).await.unwrap(), None);
}
}

both! {
    async fn only_lifecycle_transitions_happen_and_each_is_an_event(store) {
        let agent = store.create_agent(new_agent("a")).await.unwrap();
        for (to, reason) in [
            (AgentState::Running, "started"),
            (AgentState::Paused, "operator"),
            (AgentState::Running, "operator"),
            (AgentState::Terminated, "stop"),
        ] {
            let rec = store.transition_agent(&agent.id, to, reason).await.unwrap();
            assert_eq!(rec.state, to);
        }
        let err = store
            .transition_agent(&agent.id, AgentState::Running, "resume")
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::InvalidTransition(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            "an agent cannot go from terminated to running"
        );
        let stored = store.get_agent(&agent.id).await.unwrap().unwrap();
        assert_eq!(stored.state, AgentState::Terminated);

        let events = store.events_after(0, Some(&agent.id), 100).await.unwrap();
        let kinds: Vec<(&str, String)> = events
            .iter()
            .map(|e| {
                (
                    e.kind.as_str(),
                    format!(
                        "{}>{}",
                        e.data["from"].as_str().unwrap_or(""),
                        e.data["to"].as_str().unwrap_or("")
                    ),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("agent.spawned", ">".to_owned()),
                ("agent.state_changed", "pending>running".to_owned()),
                ("agent.state_changed", "running>paused".to_owned()),
                ("agent.state_changed", "paused>running".to_owned()),
                ("agent.state_changed", "running>terminated".to_owned()),
            ]
        );
        let err = store
            .transition_agent(&AgentId::new(), AgentState::Running, "x")
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    }
}

both! {
    async fn delivery_is_idempotent_per_key_and_claims_go_oldest_first(store) {
        let a = store.create_agent(new_agent("a")).await.unwrap();
        let first = store
            .deliver(&a.id, "operator", "task one", "k1")
            .await
            .unwrap();
        let again = store
            .deliver(&a.id, "operator", "task one", "k1")
            .await
            .unwrap();
        assert!(!first.duplicate && again.duplicate);
        assert_eq!(first.id, again.id);
        store.deliver(&a.id, "b", "task two", "k2").await.unwrap();
        assert_eq!(
            store
                .inbox(&a.id, InboxStatus::Pending)
                .await
                .unwrap()
                .len(),
            2
        );
        let delivered = store.events_after(0, Some(&a.id), 100).await.unwrap();
        assert_eq!(
            delivered
                .iter()
                .filter(|e| e.kind == "message.delivered")
                .count(),
            2,
            "a duplicate delivery records no event"
        );

        let m1 = store.claim_next(&a.id).await.unwrap().unwrap();
        assert_eq!(
            (m1.body.as_str(), m1.status, m1.attempts),
            ("task one", InboxStatus::Processing, 1)
        );
        let m2 = store.claim_next(&a.id).await.unwrap().unwrap();
        assert_eq!(m2.body, "task two");
        assert_eq!(store.claim_next(&a.id).await.unwrap(), None);
        store.finish_message(m1.id).await.unwrap();
        let err = store.finish_message(m1.id).await.unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
        assert_eq!(
            store.inbox(&a.id, InboxStatus::Done).await.unwrap().len(),
            1
        );

        let err = store
            .deliver(&AgentId::new(), "x", "y", "z")
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    }
}

both! {
async fn a_message_claimed_by_a_dead_process_is_claimed_again_after_release(place: Place) {
    let store = place.store().await;
    let a = store.create_agent(new_agent("a")).await.unwrap();
    store.deliver(&a.id, "operator", "work", "k").await.unwrap();
    let claimed = store.claim_next(&a.id).await.unwrap().unwrap();
    drop(store); // the process dies mid-turn

    let store = place.store().await;
    assert_eq!(
        store.claim_next(&a.id).await.unwrap(),
        None,
        "still claimed"
    );
    assert_eq!(store.release_claimed().await.unwrap(), 1);
    let again = store.claim_next(&a.id).await.unwrap().unwrap();
    assert_eq!((again.id, again.attempts), (claimed.id, 2));
    store.finish_message(again.id).await.unwrap();
    assert_eq!(store.release_claimed().await.unwrap(), 0);
}
}

both! {
    async fn the_event_history_is_queryable_and_bounded(store) {
        let a = AgentId::new();
        for i in 0..10 {
            let agent = (i % 2 == 0).then_some(&a);
            store
                .append_event("test.tick", agent, serde_json::json!({"i": i}))
                .await
                .unwrap();
        }
        let all = store.events_after(0, None, 100).await.unwrap();
        assert_eq!(all.len(), 10);
        assert!(all.windows(2).all(|w| w[0].seq < w[1].seq));
        let mine = store.events_after(0, Some(&a), 100).await.unwrap();
        assert_eq!(
            mine.iter()
                .map(|e| e.data["i"].as_i64().unwrap())
                .collect::<Vec<_>>(),
            [0, 2, 4, 6, 8]
        );
        let page = store.events_after(all[3].seq, None, 2).await.unwrap();
        assert_eq!(
            page.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [all[4].seq, all[5].seq]
        );
        // The newest few, oldest first; only the agent's when asked.
        let tail = store.events_tail(None, 3).await.unwrap();
        assert_eq!(
            tail.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [all[7].seq, all[8].seq, all[9].seq]
        );
        let tail = store.events_tail(Some(&a), 2).await.unwrap();
        assert_eq!(
            tail.iter()
                .map(|e| e.data["i"].as_i64().unwrap())
                .collect::<Vec<_>>(),
            [6, 8]
        );

        assert_eq!(store.prune_events(4).await.unwrap(), 6);
        let left = store.events_after(0, None, 100).await.unwrap();
        assert_eq!(
            left.iter()
                .map(|e| e.data["i"].as_i64().unwrap())
                .collect::<Vec<_>>(),
            [6, 7, 8, 9]
        );
        // Sequence numbers are never reused after pruning.
        let next = store
            .append_event("test.tick", None, serde_json::json!({}))
            .await
            .unwrap();
        assert!(next.seq > all[9].seq);
    }
}

both! {
    async fn the_event_history_is_searched_by_kind_agent_time_and_position(store) {
        let (a, b) = (AgentId::new(), AgentId::new());
        for (kind, agent) in [
            ("tool.call", &a),
            ("tool.result", &a),
            ("turn.ended", &a),
            ("tool.call", &b),
            ("tool_x.call", &b),
        ] {
            store
                .append_event(kind, Some(agent), serde_json::json!({}))
                .await
                .unwrap();
        }
        let kinds = |events: Vec<reef_store::StoredEvent>| {
            events.into_iter().map(|e| e.kind).collect::<Vec<_>>()
        };
        let filter = |kind: Option<&str>, agent: Option<&AgentId>| reef_store::EventFilter {
            kind: kind.map(str::to_owned),
            agent: agent.cloned(),
            ..Default::default()
        };
        // Newest first; a prefix is literal (`_` is not a wildcard).
        assert_eq!(
            kinds(
                store
                    .search_events(filter(Some("tool."), None), 10)
                    .await
                    .unwrap()
            ),
            ["tool.call", "tool.result", "tool.call"]
        );
        assert_eq!(
            kinds(
                store
                    .search_events(filter(Some("tool_."), None), 10)
                    .await
                    .unwrap()
            ),
            Vec::<String>::new()
        );
        let upper = store.search_events(filter(Some("Tool."), None), 10);
        assert!(
            upper.await.unwrap().is_empty(),
            "a prefix is matched case and all, as the live tail does"
        );
        assert_eq!(
            kinds(
                store
                    .search_events(filter(Some("tool.call"), Some(&a)), 10)
                    .await
                    .unwrap()
            ),
            ["tool.call"]
        );
        let all = store.search_events(filter(None, None), 10).await.unwrap();
        assert_eq!(all.len(), 5);
        let older = reef_store::EventFilter {
            before: Some(all[1].seq),
            ..Default::default()
        };
        let page = store.search_events(older, 2).await.unwrap();
        assert_eq!(
            page.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [all[2].seq, all[3].seq]
        );
        let future = reef_store::EventFilter {
            from: Some("9999-01-01T00:00:00.000Z".into()),
            ..Default::default()
        };
        assert!(store.search_events(future, 10).await.unwrap().is_empty());
        let past = reef_store::EventFilter {
            until: Some("2000-01-01T00:00:00.000Z".into()),
            ..Default::default()
        };
        assert!(store.search_events(past, 10).await.unwrap().is_empty());
    }
}
