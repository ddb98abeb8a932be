//! Pending items (questions, approvals, requests) and rooms.

use reef_core::{AgentId, Budget, Capabilities};
use reef_store::{
    InboxStatus, Letter, NewAgent, NewPending, PendingKind, PendingStatus, Store, StoreError,
};
use serde_json::json;

async fn agent(store: &Store, name: &str) -> AgentId {
    store
        .create_agent(NewAgent {
            id: AgentId::new(),
            name: name.into(),
            template: "worker".into(),
            persona: String::new(),
            model: None,
            workspace: "/ws".into(),
            capabilities: Capabilities::default(),
            budget: Budget::default(),
            parent: None,
            ephemeral: false,
        })
        .await
        .unwrap()
        .id
}

fn question(id: &str, asker: &AgentId, expires_at: Option<i64>) -> NewPending {
    NewPending {
        id: id.into(),
        kind: PendingKind::Question,
        agent_id: Some(asker.clone()),
        target_id: None,
        payload: json!({"question": "which port?"}),
        expires_at,
        letter: None,
        followup_request: None,
    }
}

both! {
    async fn a_resolved_breakpoint_is_recorded_but_sends_the_agent_nothing(store) {
        let agent = agent(store, "w1").await;
        let mut stop = question("bp_1", &agent, None);
        stop.kind = PendingKind::Breakpoint;
        stop.payload = json!({"agent": "w1", "stop": {"at": "tool_call", "tool": "shell"}});
        store.create_pending(stop).await.unwrap();
        let listed = store
            .list_pending(Some(PendingStatus::Pending))
            .await
            .unwrap();
        assert_eq!(listed[0].kind, PendingKind::Breakpoint);
        store
            .resolve_pending("bp_1", PendingStatus::Answered, Some("step".into()), None)
            .await
            .unwrap();
        assert!(
            store
                .inbox(&agent, InboxStatus::Pending)
                .await
                .unwrap()
                .is_empty()
        );
        let kinds: Vec<String> = store
            .events_after(0, Some(&agent), 100)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(
            kinds,
            ["agent.spawned", "breakpoint.created", "breakpoint.answered"]
        );
    }
}

both! {
    async fn an_answered_question_wakes_the_asker_once_and_cannot_be_answered_again(store) {
        let asker = agent(store, "w1").await;
        store
            .create_pending(question("pnd_q1", &asker, None))
            .await
            .unwrap();
        assert_eq!(store.get_pending("pnd_q").await.unwrap().id, "pnd_q1");

        let item = store
            .resolve_pending("pnd_q1", PendingStatus::Answered, Some("8080".into()), None)
            .await
            .unwrap();
        assert_eq!(item.status, PendingStatus::Answered);
        let inbox = store.inbox(&asker, InboxStatus::Pending).await.unwrap();
        assert_eq!(inbox.len(), 1);
        assert_eq!(inbox[0].sender, "operator");
        assert!(
            inbox[0].body.contains("which port?") && inbox[0].body.contains("8080"),
            "{}",
            inbox[0].body
        );

        let again = store
            .resolve_pending("pnd_q1", PendingStatus::Cancelled, None, None)
            .await
            .unwrap_err();
        assert!(matches!(again, StoreError::Conflict(_)), "{again}");
        assert!(again.to_string().contains("already answered"), "{again}");
        assert_eq!(
            store
                .inbox(&asker, InboxStatus::Pending)
                .await
                .unwrap()
                .len(),
            1
        );
        let kinds: Vec<String> = store
            .events_after(0, Some(&asker), 100)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect();
        assert!(kinds.contains(&"question.created".to_owned()), "{kinds:?}");
        assert!(kinds.contains(&"question.answered".to_owned()), "{kinds:?}");
    }
}

both! {
    async fn only_items_past_their_deadline_are_due(store) {
        let asker = agent(store, "w1").await;
        store
            .create_pending(question("pnd_a", &asker, Some(100)))
            .await
            .unwrap();
        store
            .create_pending(question("pnd_b", &asker, Some(200)))
            .await
            .unwrap();
        store
            .create_pending(question("pnd_c", &asker, None))
            .await
            .unwrap();
        assert_eq!(store.next_deadline().await.unwrap(), Some(100));
        let due: Vec<String> = store
            .due_pending(150)
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(due, ["pnd_a"]);
        let ambiguous = store.get_pending("pnd_").await.unwrap_err();
        assert!(
            matches!(ambiguous, StoreError::Ambiguous { .. }),
            "{ambiguous}"
        );
    }
}

both! {
    async fn finishing_a_request_answers_the_requester_in_the_same_step(store) {
        let boss = agent(store, "boss").await;
        let worker = agent(store, "worker").await;
        store
            .create_pending(NewPending {
                id: "pnd_r1".into(),
                kind: PendingKind::Request,
                agent_id: Some(boss.clone()),
                target_id: Some(worker.clone()),
                payload: json!({"text": "count the files"}),
                expires_at: None,
                letter: Some(Letter {
                    to: worker.clone(),
                    sender: "boss".into(),
                    body: "count the files".into(),
                    dedup_key: "k1".into(),
                    request_id: None,
                }),
                followup_request: None,
            })
            .await
            .unwrap();
        let claimed = store.claim_next(&worker).await.unwrap().unwrap();
        assert_eq!(claimed.request_id.as_deref(), Some("pnd_r1"));
        store
            .complete_message(claimed.id, Some("12 files".into()))
            .await
            .unwrap();

        let reply = store.inbox(&boss, InboxStatus::Pending).await.unwrap();
        assert_eq!(reply.len(), 1);
        assert_eq!(reply[0].sender, "worker");
        assert!(reply[0].body.contains("12 files"), "{}", reply[0].body);
        let item = store.get_pending("pnd_r1").await.unwrap();
        assert_eq!(item.status, PendingStatus::Answered);
        assert!(
            store
                .complete_message(claimed.id, Some("again".into()))
                .await
                .is_err()
        );
    }
}

both! {
    async fn a_room_post_reaches_every_member_but_the_sender_once(store) {
        let a = agent(store, "a").await;
        let b = agent(store, "b").await;
        let c = agent(store, "c").await;
        for id in [&a, &b, &c] {
            store.join_room("#agents", id).await.unwrap();
        }
        store.join_room("#agents", &a).await.unwrap();
        assert_eq!(
            store
                .post_room("#agents", Some(&a), "hello all", "p1")
                .await
                .unwrap(),
            2
        );
        assert_eq!(
            store
                .post_room("#agents", Some(&a), "hello all", "p1")
                .await
                .unwrap(),
            0
        );
        assert!(
            store
                .inbox(&a, InboxStatus::Pending)
                .await
                .unwrap()
                .is_empty()
        );
        let got = store.inbox(&b, InboxStatus::Pending).await.unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].sender, "a in #agents");

        let rooms = store.list_rooms().await.unwrap();
        let names: Vec<&str> = rooms.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["#agents", "#control"]);
        assert_eq!(rooms[0].members, ["a", "b", "c"]);
        let missing = store
            .post_room("#nowhere", None, "x", "p2")
            .await
            .unwrap_err();
        assert!(matches!(missing, StoreError::NotFound(_)), "{missing}");
        store.create_room("#ops").await.unwrap();
        assert!(matches!(
            store.create_room("#ops").await.unwrap_err(),
            StoreError::Conflict(_)
        ));
    }
}
