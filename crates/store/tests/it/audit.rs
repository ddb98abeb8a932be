//! The audit log, on both backends: which events become records and what of them is kept (a terminal's text
//! only hashed), the chain verifying,
//! an edit, a removal, a foreign key and a moved checkpoint each named by verification,
//! pruning, and the key file.

use crate::Place;
use reef_store::{AuditFilter, ChainBreak, Store, StoreError};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

fn all() -> AuditFilter {
    AuditFilter {
        limit: 1000,
        ..AuditFilter::default()
    }
}

/// A store with five audit records: three tool calls, an approval and an answer.
async fn store_with_records(place: &Place) -> Store {
    let store = place.store().await;
    for i in 0..3 {
        let args = format!("{{\"command\":\"echo {i}\"}}");
        store
            .append_audit(
                "tool.call",
                Some("ada"),
                json!({"call_id": format!("c{i}"), "name": "shell",
                       "arguments_sha256": reef_security::audit::sha256_hex(args.as_bytes())}),
            )
            .await
            .unwrap();
        // Not an audit record: the event history has the arguments.
        store
            .append_event(
                "tool.call",
                None,
                json!({"call_id": format!("c{i}"), "name": "shell", "arguments": args}),
            )
            .await
            .unwrap();
        // Not an audit record.
        store
            .append_event("agent.message", None, json!({"text": "hi"}))
            .await
            .unwrap();
    }
    store
        .append_event(
            "approval.created",
            None,
            json!({"id": "ap_1", "payload": {"command": "rm -rf build"}}),
        )
        .await
        .unwrap();
    store
        .append_event(
            "approval.answered",
            None,
            json!({"id": "ap_1", "answer": "approved", "by": "operator"}),
        )
        .await
        .unwrap();
    store
}

both! {
    async fn audited_events_are_mirrored_and_chained(place: Place) {
        let store = store_with_records(place).await;
        let records = store.audit_records(all()).await.unwrap();
        let kinds: Vec<&str> = records.iter().rev().map(|r| r.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "tool.call",
                "tool.call",
                "tool.call",
                "approval.created",
                "approval.answered"
            ]
        );
        let first = records.last().unwrap();
        assert_eq!(first.seq, 1);
        assert_eq!(first.prev, "0".repeat(64));
        assert_eq!(first.agent.as_deref(), Some("ada"));
        assert_eq!(first.data["name"], "shell");
        // Each record names the one before.
        for pair in records.windows(2) {
            assert_eq!(pair[0].prev, pair[1].hash);
        }

        let verdict = store.verify_audit().await.unwrap();
        assert_eq!(verdict.broken, None);
        assert_eq!((verdict.checked, verdict.head), (5, 5));

        // Filters: a kind prefix, and the newest only.
        let approvals = store
            .audit_records(AuditFilter {
                kind: Some("approval.".into()),
                limit: 10,
                ..AuditFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(approvals.len(), 2);
        let newest = store
            .audit_records(AuditFilter {
                limit: 1,
                ..AuditFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(newest[0].kind, "approval.answered");
    }

    async fn an_edited_record_is_named(place: Place) {
        let store = store_with_records(place).await;
        place
            .execute("UPDATE audit SET data = replace(data, 'rm -rf build', 'ls') WHERE seq = 4")
            .await;
        let verdict = store.verify_audit().await.unwrap();
        assert_eq!(verdict.broken, Some(ChainBreak::Hash { seq: 4 }));
        assert_eq!(verdict.head, 3);
    }

    async fn a_rehashed_record_is_still_named_without_the_key(place: Place) {
        let store = store_with_records(place).await;
        // Someone with the database but not the key recomputes the hash as a plain SHA-256.
        let data = place.text("SELECT data FROM audit WHERE seq = 2").await;
        let forged = reef_security::audit::sha256_hex(data.as_bytes());
        place
            .execute(&format!("UPDATE audit SET hash = '{forged}' WHERE seq = 2"))
            .await;
        let verdict = store.verify_audit().await.unwrap();
        assert_eq!(verdict.broken, Some(ChainBreak::Hash { seq: 2 }));
    }

    async fn a_removed_record_shows_as_a_gap(place: Place) {
        let store = store_with_records(place).await;
        place.execute("DELETE FROM audit WHERE seq = 3").await;
        let verdict = store.verify_audit().await.unwrap();
        assert_eq!(
            verdict.broken,
            Some(ChainBreak::Gap {
                seq: 4,
                prev_seq: 2
            })
        );
    }

    async fn another_key_does_not_verify_the_log(place: Place) {
        let store = store_with_records(place).await;
        drop(store);
        let key = place.dir().join(reef_store::AUDIT_KEY_FILE);
        std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
        let store = place.store().await;
        let verdict = store.verify_audit().await.unwrap();
        assert_eq!(verdict.broken, Some(ChainBreak::Hash { seq: 1 }));
    }

    async fn pruning_leaves_a_sealed_checkpoint(place: Place) {
        let store = store_with_records(place).await;
        let records = store.audit_records(all()).await.unwrap();
        // Everything written before record 4.
        let fourth = records.iter().find(|r| r.seq == 4).unwrap();
        assert_eq!(store.prune_audit(&fourth.at).await.unwrap(), 3);

        let left = store.audit_records(all()).await.unwrap();
        let seqs: Vec<u64> = left.iter().rev().map(|r| r.seq).collect();
        assert_eq!(seqs, [4, 5, 6], "the prune itself is recorded as 6");
        assert_eq!(left[0].kind, "audit.pruned");
        assert_eq!(left[0].data["through"], 3);
        let verdict = store.verify_audit().await.unwrap();
        assert_eq!(verdict.broken, None);
        assert_eq!(verdict.checkpoint, Some(3));
        assert_eq!((verdict.checked, verdict.head), (3, 6));

        // New records chain on.
        store
            .append_audit("secret.used", None, json!({"name": "GITHUB_TOKEN"}))
            .await
            .unwrap();
        assert_eq!(store.verify_audit().await.unwrap().head, 7);

        // A checkpoint moved by hand no longer matches its seal.
        place.execute("UPDATE audit_checkpoint SET seq = 2").await;
        let verdict = store.verify_audit().await.unwrap();
        assert_eq!(verdict.broken, Some(ChainBreak::Checkpoint { seq: 2 }));
    }

    async fn a_broken_log_is_not_pruned(place: Place) {
        let store = store_with_records(place).await;
        place
            .execute("UPDATE audit SET kind = 'tool.result' WHERE seq = 1")
            .await;
        let records = store.audit_records(all()).await.unwrap();
        // Everything up to record 3 would go: refused, nothing removed.
        let fourth = records.iter().find(|r| r.seq == 4).unwrap();
        let err = store.prune_audit(&fourth.at).await.unwrap_err();
        assert!(matches!(err, StoreError::Conflict(_)), "{err}");
        assert!(err.to_string().contains("record 1"), "{err}");
        assert_eq!(store.audit_records(all()).await.unwrap().len(), 5);
    }

    async fn the_key_file_is_private_and_never_a_link(place: Place) {
        let _store = place.store().await;
        let key = place.dir().join(reef_store::AUDIT_KEY_FILE);
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(&key).unwrap();
        assert_eq!(text.trim().len(), 64);

        // Opening again keeps the key.
        drop(_store);
        let _again = place.store().await;
        assert_eq!(std::fs::read_to_string(&key).unwrap(), text);

        // A link in its place is refused, not followed.
        let other = place.another().await;
        let target = other.dir().join("elsewhere");
        std::fs::write(&target, &text).unwrap();
        let linked = other.dir().join(reef_store::AUDIT_KEY_FILE);
        std::os::unix::fs::symlink(&target, &linked).unwrap();
        let err = other.open().await.unwrap_err();
        assert!(err.to_string().contains("audit key"), "{err}");

        // A damaged key says so.
        let third = place.another().await;
        std::fs::write(third.dir().join(reef_store::AUDIT_KEY_FILE), "not a key").unwrap();
        let err = third.open().await.unwrap_err();
        assert!(err.to_string().contains("not 64 hex digits"), "{err}");
    }

    async fn an_edit_of_any_column_is_named(place: Place) {
        for (column, value) in [
            ("at", "'2020-01-01T00:00:00.000Z'"),
            ("kind", "'tool.result'"),
            ("agent", "'mallory'"),
            ("prev", "hash"),
            ("seq", "seq + 100"),
        ] {
            let place = place.another().await;
            let store = store_with_records(&place).await;
            place
                .execute(&format!("UPDATE audit SET {column} = {value} WHERE seq = 2"))
                .await;
            let broken = store.verify_audit().await.unwrap().broken.unwrap();
            assert_eq!(broken.seq(), 2, "{column}: {broken}");
        }
    }

    async fn two_stores_appending_at_once_keep_one_chain(place: Place) {
        let a = place.store().await;
        let b = place.store().await;
        let write = |store: Store, who: &'static str| async move {
            for i in 0..40 {
                store
                    .append_audit("api.request", Some(who), json!({"i": i}))
                    .await
                    .unwrap();
            }
        };
        tokio::join!(write(a.clone(), "a"), write(b, "b"));
        let verdict = a.verify_audit().await.unwrap();
        assert_eq!(verdict.broken, None);
        assert_eq!((verdict.checked, verdict.head), (80, 80));
    }

    async fn a_log_whose_key_is_gone_is_not_given_a_new_one(place: Place) {
        drop(store_with_records(place).await);
        let key = place.dir().join(reef_store::AUDIT_KEY_FILE);
        std::fs::remove_file(&key).unwrap();
        let err = place.open().await.unwrap_err();
        assert!(matches!(err, StoreError::Key(_)), "{err}");
        assert!(err.to_string().contains("is missing"), "{err}");
        assert!(!key.exists(), "no new key was left in its place");
        // An empty log may start with a new key.
        let fresh = place.another().await;
        drop(fresh.store().await);
        std::fs::remove_file(fresh.dir().join(reef_store::AUDIT_KEY_FILE)).unwrap();
        assert!(fresh.open().await.is_ok());
    }
}

both! {
    async fn a_terminal_record_keeps_the_hash_of_what_was_typed(store) {
        store
            .append_event(
                "terminal.closed",
                None,
                json!({"terminal": "t1", "by": "dashboard", "typed": "cat notes.txt\n",
                       "shown_tail": "secret plans", "typed_bytes": 14}),
            )
            .await
            .unwrap();
        let records = store.audit_records(all()).await.unwrap();
        assert_eq!(records.len(), 1);
        let data = &records[0].data;
        assert_eq!(data["by"], "dashboard");
        assert_eq!(data["typed_bytes"], 14);
        assert_eq!(
            data["typed_sha256"],
            reef_security::audit::sha256_hex(b"cat notes.txt\n")
        );
        assert!(data.get("typed").is_none() && data.get("shown_tail").is_none());
        assert!(!data.to_string().contains("secret plans"));
    }
}
