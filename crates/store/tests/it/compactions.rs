//! Compactions (recording, listing, refusals, going with their session) and session forks.

use crate::Place;
use crate::{new_session, store_with};
use reef_core::{
    AgentId, Budget, Capabilities, CompactionStrategy, CompactionTrigger, Message, SessionId,
    ToolCall, ToolCallId,
};
use reef_store::{CompactionRecord, NewAgent, NewCompaction, NewSession, Store, StoreError};

fn compaction(from_seq: u64, to_seq: u64) -> NewCompaction {
    NewCompaction {
        from_seq,
        to_seq,
        strategy: CompactionStrategy::Summarize,
        trigger: CompactionTrigger::Threshold,
        summary: Some(format!("summary of {from_seq}..={to_seq}")),
        tokens_before: 1000 + to_seq,
        tokens_after: 100 + from_seq,
        window: 8192,
    }
}

/// A transcript of `n` messages: a user message first, then assistant/tool/user turns.
fn transcript(n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| match i % 4 {
            0 => Message::user(format!("question {i}")),
            1 => Message::Assistant {
                content: format!("calling {i}"),
                tool_calls: vec![ToolCall {
                    id: ToolCallId::from_string(format!("call_{i}")),
                    name: "shell".into(),
                    arguments: format!(r#"{{"cmd":"echo {i}"}}"#),
                }],
            },
            2 => Message::Tool {
                call_id: ToolCallId::from_string(format!("call_{}", i - 1)),
                name: "shell".into(),
                content: format!("out {i}"),
                is_error: i % 3 == 0,
            },
            _ => Message::Assistant {
                content: format!("answer {i}"),
                tool_calls: vec![],
            },
        })
        .collect()
}

async fn append_all(store: &Store, id: &SessionId, messages: &[Message]) {
    for m in messages {
        store.append_message(id, m).await.unwrap();
    }
}

/// A store with one session holding `n` messages.
async fn session_with(store: &Store, id: &str, n: usize) -> SessionId {
    let id = crate::session_in(store, id).await;
    append_all(store, &id, &transcript(n)).await;
    id
}

fn invalid_field(err: &StoreError) -> Option<&'static str> {
    match err {
        StoreError::Invalid { field, .. } => Some(field),
        _ => None,
    }
}

both! {
    async fn a_compaction_round_trips_every_field(store) {
        let id = session_with(store, "ses_cmp", 5).await;
        let sent = NewCompaction {
            from_seq: 2,
            to_seq: 4,
            strategy: CompactionStrategy::Archive,
            trigger: CompactionTrigger::ContextLengthError,
            summary: Some("the user asked for files ✓\nand got them".into()),
            tokens_before: 120_000,
            tokens_after: 9_500,
            window: 128_000,
        };
        let first = store.record_compaction(&id, sent.clone()).await.unwrap();
        assert_eq!(first.session_id, id);
        assert_eq!(first.after_seq, 5);
        assert_eq!(first.from_seq, 2);
        assert_eq!(first.to_seq, 4);
        assert_eq!(first.strategy, CompactionStrategy::Archive);
        assert_eq!(first.trigger, CompactionTrigger::ContextLengthError);
        assert_eq!(first.summary, sent.summary);
        assert_eq!(first.tokens_before, 120_000);
        assert_eq!(first.tokens_after, 9_500);
        assert_eq!(first.window, 128_000);
        assert_eq!(first.created_at.len(), "2025-01-01T00:00:00.000Z".len());
        assert!(first.created_at.ends_with('Z'));
        let last_message = store.messages(&id).await.unwrap().pop().unwrap();
        assert!(first.created_at > last_message.created_at);

        // Dropped messages have no summary; after_seq follows the transcript.
        store
            .append_message(&id, &Message::user("more"))
            .await
            .unwrap();
        let second = store
            .record_compaction(
                &id,
                NewCompaction {
                    from_seq: 1,
                    to_seq: 6,
                    strategy: CompactionStrategy::Truncate,
                    trigger: CompactionTrigger::Manual,
                    summary: None,
                    tokens_before: 7,
                    tokens_after: 0,
                    window: 1,
                },
            )
            .await
            .unwrap();
        assert_eq!(second.after_seq, 6);
        assert_eq!(second.summary, None);
        assert_eq!(second.trigger, CompactionTrigger::Manual);
        assert!(second.id > first.id);
        assert!(second.created_at > first.created_at);

        assert_eq!(
            store.compactions(&id).await.unwrap(),
            vec![first.clone(), second.clone()]
        );

        // The strategy the summarizer uses round-trips too, and the messages are kept.
        let third = store
            .record_compaction(&id, compaction(3, 3))
            .await
            .unwrap();
        assert_eq!(third.strategy, CompactionStrategy::Summarize);
        assert_eq!(third.trigger, CompactionTrigger::Threshold);
        assert_eq!(
            store.compactions(&id).await.unwrap(),
            vec![first, second, third]
        );
        assert_eq!(store.messages(&id).await.unwrap().len(), 6);
    }
}

both! {
async fn compactions_survive_a_reopen(place: Place) {
    let store = place.store().await;
    let id = store
        .create_session(new_session("ses_re"))
        .await
        .unwrap()
        .id;
    append_all(&store, &id, &transcript(3)).await;
    let recorded = store
        .record_compaction(&id, compaction(1, 2))
        .await
        .unwrap();
    drop(store);
    let again = place.store().await;
    assert_eq!(again.compactions(&id).await.unwrap(), vec![recorded]);
}
}

both! {
    async fn compactions_list_in_recording_order(store) {
        let id = session_with(store, "ses_order", 8).await;
        let other = store
            .create_session(new_session("ses_other"))
            .await
            .unwrap()
            .id;
        append_all(store, &other, &transcript(8)).await;
        let mut recorded = Vec::new();
        for (from, to) in [(5, 6), (1, 2), (3, 8), (2, 2)] {
            recorded.push(
                store
                    .record_compaction(&id, compaction(from, to))
                    .await
                    .unwrap(),
            );
            // Interleave another session's rows; they are not listed here.
            store
                .record_compaction(&other, compaction(1, to))
                .await
                .unwrap();
        }
        let listed = store.compactions(&id).await.unwrap();
        assert_eq!(listed, recorded);
        assert_eq!(
            listed
                .iter()
                .map(|c| (c.from_seq, c.to_seq))
                .collect::<Vec<_>>(),
            vec![(5, 6), (1, 2), (3, 8), (2, 2)]
        );
        assert!(listed.windows(2).all(|w| w[0].id < w[1].id));
        let others = store.compactions(&other).await.unwrap();
        assert_eq!(others.len(), 4);
        assert!(others.iter().all(|c| c.session_id == other));
    }
}

both! {
    async fn bad_ranges_and_unknown_sessions_are_refused(store) {
        let id = session_with(store, "ses_bad", 4).await;
        let err = store
            .record_compaction(&id, compaction(0, 2))
            .await
            .unwrap_err();
        assert_eq!(invalid_field(&err), Some("from_seq"), "{err:?}");
        let err = store
            .record_compaction(&id, compaction(3, 2))
            .await
            .unwrap_err();
        assert_eq!(invalid_field(&err), Some("to_seq"), "{err:?}");
        let err = store
            .record_compaction(&id, compaction(2, 5))
            .await
            .unwrap_err();
        assert_eq!(invalid_field(&err), Some("to_seq"), "{err:?}");
        assert!(err.to_string().contains("last message (4)"), "{err}");
        // The last message itself is in range.
        store
            .record_compaction(&id, compaction(4, 4))
            .await
            .unwrap();

        // A session without messages has nothing to compact.
        let (empty_store, empty) = store_with("ses_empty").await;
        let err = empty_store
            .record_compaction(&empty, compaction(1, 1))
            .await
            .unwrap_err();
        assert_eq!(invalid_field(&err), Some("to_seq"), "{err:?}");
        assert!(empty_store.compactions(&empty).await.unwrap().is_empty());

        let missing = SessionId::from("ses_missing");
        let err = store
            .record_compaction(&missing, compaction(1, 1))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
        let err = store.compactions(&missing).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");

        // Only the valid one was written.
        let listed = store.compactions(&id).await.unwrap();
        assert_eq!(
            listed
                .iter()
                .map(|c| (c.from_seq, c.to_seq))
                .collect::<Vec<_>>(),
            vec![(4, 4)]
        );
    }
}

both! {
async fn undecodable_rows_are_corrupt_and_named(place: Place) {
    let store = place.store().await;
    let id = store
        .create_session(new_session("ses_cor"))
        .await
        .unwrap()
        .id;
    append_all(&store, &id, &transcript(2)).await;
    let good = store
        .record_compaction(&id, compaction(1, 1))
        .await
        .unwrap();
    place
        .execute(&format!(
            "UPDATE compactions SET trigger = 'bored' WHERE id = {}",
            good.id
        ))
        .await;
    let err = store.compactions(&id).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("compaction {} of session ses_cor", good.id)),
        "{text}"
    );
    assert!(text.contains("unknown trigger 'bored'"), "{text}");

    place
        .execute(&format!(
            "UPDATE compactions SET trigger = 'manual', strategy = 'shred' WHERE id = {}",
            good.id
        ))
        .await;
    let err = store.compactions(&id).await.unwrap_err();
    assert!(
        err.to_string().contains("unknown strategy 'shred'"),
        "{err}"
    );
}
}

fn new_agent(name: &str) -> NewAgent {
    NewAgent {
        id: AgentId::new(),
        name: name.into(),
        template: "worker".into(),
        persona: "You compact.".into(),
        model: None,
        workspace: format!("/reef/agents/{name}/workspace"),
        capabilities: Capabilities::default(),
        budget: Budget::default(),
        parent: None,
        ephemeral: false,
    }
}

/// How many rows of `table` belong to `session`, read directly.
async fn count(place: &Place, table: &str, session: &str) -> i64 {
    place
        .text(&format!(
            "SELECT CAST(COUNT(*) AS TEXT) FROM {table} WHERE session_id = '{session}'"
        ))
        .await
        .parse()
        .unwrap()
}

both! {
async fn compactions_go_with_their_session_like_messages(place: Place) {
    let store = place.store().await;
    let mut sessions = Vec::new();
    let mut agents = Vec::new();
    for name in ["kept", "purged"] {
        let agent = store.create_agent(new_agent(name)).await.unwrap();
        let session = store
            .create_session(new_session(&format!("ses_{name}")))
            .await
            .unwrap()
            .id;
        store.set_agent_session(&agent.id, &session).await.unwrap();
        append_all(&store, &session, &transcript(4)).await;
        store
            .record_compaction(&session, compaction(1, 2))
            .await
            .unwrap();
        store
            .record_compaction(&session, compaction(3, 4))
            .await
            .unwrap();
        sessions.push(session);
        agents.push(agent.id);
    }

    // Without purge the transcript stays readable, and so do its compactions.
    let kept_before = store.compactions(&sessions[0]).await.unwrap();
    store.delete_agent(&agents[0], false).await.unwrap();
    assert_eq!(store.messages(&sessions[0]).await.unwrap().len(), 4);
    assert_eq!(store.compactions(&sessions[0]).await.unwrap(), kept_before);

    // With purge both go, rows and all.
    store.delete_agent(&agents[1], true).await.unwrap();
    let err = store.messages(&sessions[1]).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    let err = store.compactions(&sessions[1]).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    assert_eq!(count(place, "messages", "ses_purged").await, 0);
    assert_eq!(count(place, "compactions", "ses_purged").await, 0);
    assert_eq!(count(place, "messages", "ses_kept").await, 4);
    assert_eq!(count(place, "compactions", "ses_kept").await, 2);
}
}

fn fork_request(id: &str) -> NewSession {
    NewSession {
        id: SessionId::from(id),
        agent: Some("replayer".into()),
        workspace: "/tmp/replay".into(),
        provider: "anthropic".into(),
        model: "claude-test".into(),
    }
}

/// The parts of a compaction a fork copies (everything but id, session and after_seq).
fn copied(c: &CompactionRecord) -> impl PartialEq + std::fmt::Debug + use<> {
    (
        c.from_seq,
        c.to_seq,
        c.strategy,
        c.trigger,
        c.summary.clone(),
        c.tokens_before,
        c.tokens_after,
        c.window,
        c.created_at.clone(),
    )
}

both! {
async fn a_fork_copies_the_prefix_and_its_compactions(place: Place) {
    let store = place.store().await;
    let source = store
        .create_session(new_session("ses_src"))
        .await
        .unwrap()
        .id;
    let sent = transcript(8);
    append_all(&store, &source, &sent[..3]).await;
    let a = store
        .record_compaction(&source, compaction(1, 2))
        .await
        .unwrap();
    append_all(&store, &source, &sent[3..]).await;
    let b = store
        .record_compaction(&source, compaction(3, 5))
        .await
        .unwrap();
    let c = store
        .record_compaction(&source, compaction(2, 6))
        .await
        .unwrap();
    let d = store
        .record_compaction(&source, compaction(7, 8))
        .await
        .unwrap();
    assert_eq!((a.after_seq, b.after_seq), (3, 8));

    let source_before = store.get_session(&source).await.unwrap().unwrap();
    let messages_before = store.messages(&source).await.unwrap();
    let compactions_before = store.compactions(&source).await.unwrap();

    let fork = store
        .fork_session(&source, 5, fork_request("ses_fork"))
        .await
        .unwrap();
    assert_eq!(fork.id, SessionId::from("ses_fork"));
    assert_eq!(fork.title.as_deref(), Some("question 0"));
    assert_eq!(fork.title, source_before.title);
    assert_eq!(fork.workspace, "/tmp/replay");
    assert_eq!(fork.provider, "anthropic");
    assert_eq!(fork.model, "claude-test");
    assert_eq!(fork.created_at, fork.updated_at);
    assert!(fork.created_at > source_before.updated_at);
    assert_eq!(
        store.get_session(&fork.id).await.unwrap(),
        Some(fork.clone())
    );
    let agent = place
        .text("SELECT agent FROM sessions WHERE id = 'ses_fork'")
        .await;
    assert_eq!(agent, "replayer");

    // Exactly messages 1..=5: same seqs, contents and timestamps.
    let forked = store.messages(&fork.id).await.unwrap();
    assert_eq!(forked, messages_before[..5].to_vec());
    assert_eq!(
        forked.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );

    // Only the compactions inside 1..=5 (a and b), in order, with new ids; after_seq is
    // capped at the fork point.
    let fork_compactions = store.compactions(&fork.id).await.unwrap();
    assert_eq!(
        fork_compactions.iter().map(copied).collect::<Vec<_>>(),
        vec![copied(&a), copied(&b)]
    );
    assert!(fork_compactions.iter().all(|x| x.session_id == fork.id));
    assert_eq!(
        fork_compactions
            .iter()
            .map(|x| x.after_seq)
            .collect::<Vec<_>>(),
        vec![3, 5]
    );
    assert!(fork_compactions[0].id > d.id);
    assert!(fork_compactions[0].id < fork_compactions[1].id);

    // The fork goes on by itself: appends continue at 6, compactions check its own messages.
    let next = store
        .append_message(&fork.id, &Message::user("a different turn"))
        .await
        .unwrap();
    assert_eq!(next.seq, 6);
    let err = store
        .record_compaction(&fork.id, compaction(1, 7))
        .await
        .unwrap_err();
    assert_eq!(invalid_field(&err), Some("to_seq"), "{err:?}");
    let own = store
        .record_compaction(&fork.id, compaction(4, 6))
        .await
        .unwrap();
    assert_eq!(own.after_seq, 6);
    let after = store.messages(&fork.id).await.unwrap();
    assert_eq!(after.len(), 6);
    assert_eq!(after[5].message, Message::user("a different turn"));
    assert_eq!(after[..5], messages_before[..5]);

    // The source is untouched.
    assert_eq!(
        store.get_session(&source).await.unwrap(),
        Some(source_before)
    );
    assert_eq!(store.messages(&source).await.unwrap(), messages_before);
    assert_eq!(
        store.compactions(&source).await.unwrap(),
        compactions_before
    );
    assert_eq!(compactions_before, vec![a, b, c, d]);
}
}

both! {
    async fn a_fork_of_the_whole_session_copies_everything(store) {
        let source = session_with(store, "ses_whole", 4).await;
        let a = store
            .record_compaction(&source, compaction(1, 4))
            .await
            .unwrap();
        let fork = store
            .fork_session(&source, 4, fork_request("ses_whole_fork"))
            .await
            .unwrap();
        assert_eq!(
            store.messages(&fork.id).await.unwrap(),
            store.messages(&source).await.unwrap()
        );
        let copies = store.compactions(&fork.id).await.unwrap();
        assert_eq!(
            copies.iter().map(copied).collect::<Vec<_>>(),
            vec![copied(&a)]
        );
        assert_eq!(copies[0].after_seq, 4);

        // A fork of a fork is a fork like any other.
        let again = store
            .fork_session(&fork.id, 1, fork_request("ses_whole_fork2"))
            .await
            .unwrap();
        assert_eq!(store.messages(&again.id).await.unwrap().len(), 1);
        assert!(store.compactions(&again.id).await.unwrap().is_empty());
    }
}

both! {
    async fn bad_forks_are_refused_and_leave_nothing(store) {
        let source = session_with(store, "ses_fsrc", 3).await;
        for upto in [0, 4] {
            let err = store
                .fork_session(&source, upto, fork_request("ses_nope"))
                .await
                .unwrap_err();
            assert_eq!(invalid_field(&err), Some("upto_seq"), "{upto}: {err:?}");
        }
        let empty = store
            .create_session(new_session("ses_fempty"))
            .await
            .unwrap()
            .id;
        let err = store
            .fork_session(&empty, 1, fork_request("ses_nope"))
            .await
            .unwrap_err();
        assert_eq!(invalid_field(&err), Some("upto_seq"), "{err:?}");

        let err = store
            .fork_session(&SessionId::from("ses_missing"), 1, fork_request("ses_nope"))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");

        // Forking onto an existing id (including the source's own) changes neither session.
        let before = store.messages(&empty).await.unwrap();
        for target in ["ses_fempty", "ses_fsrc"] {
            let err = store
                .fork_session(&source, 2, fork_request(target))
                .await
                .unwrap_err();
            assert!(matches!(err, StoreError::Conflict(_)), "{target}: {err:?}");
        }
        assert_eq!(store.messages(&empty).await.unwrap(), before);
        assert_eq!(store.messages(&source).await.unwrap().len(), 3);

        assert!(
            store
                .get_session(&SessionId::from("ses_nope"))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(store.list_sessions(10).await.unwrap().len(), 2);
    }
}
