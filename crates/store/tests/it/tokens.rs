//! Capability tokens in the store, on both backends: the root key beside the database (0600, the same after a
//! reopen, so a token minted before verifies after), an agent's token with its `cap.minted`
//! record, and revocations written once with their `cap.revoked` record.

use crate::agents::new_agent;
use reef_core::{Budget, Capabilities};
use reef_security::cap::{Grant, OPERATOR, Token};
use reef_store::{AuditFilter, CAP_KEY_FILE, cap_key_path};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

fn grant(agent: &str) -> Grant {
    Grant {
        agent: agent.into(),
        by: OPERATOR.into(),
        capabilities: Capabilities::default(),
        budget: Budget::default(),
    }
}

#[test]
fn the_root_key_sits_beside_a_sqlite_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reef.db");
    assert_eq!(cap_key_path(&path), dir.path().join("cap.key"));
}

both! {
async fn a_token_kept_in_the_store_verifies_after_a_reopen_and_revocations_are_recorded(
    place: Place
) {
    let store = place.store().await;
    let key = place.dir().join(CAP_KEY_FILE);
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let ada = store.create_agent(new_agent("ada")).await.unwrap();
    assert_eq!(
        store.capability_state("ada").await.unwrap().unwrap().token,
        None
    );
    assert_eq!(store.capability_state("nobody").await.unwrap(), None);
    let token = Token::mint(store.capability_root(), &grant("ada")).unwrap();
    store
        .set_agent_token(
            &ada.id,
            token.text(),
            None,
            "cap.minted",
            json!({"by": OPERATOR}),
        )
        .await
        .unwrap();
    drop(store);

    let store = place.store().await;
    let state = store.capability_state("ada").await.unwrap().unwrap();
    let text = state.token.unwrap();
    let again = Token::parse(&text, store.capability_root()).unwrap();
    assert_eq!(again.grants(), token.grants());

    let ids = again.revocation_ids();
    assert_eq!(store.revoke_tokens("ada", &ids, "test").await.unwrap(), 1);
    assert_eq!(store.revoke_tokens("ada", &ids, "again").await.unwrap(), 0);
    let state = store.capability_state("ada").await.unwrap().unwrap();
    assert!(state.revoked.contains(&ids[0]));
    assert_eq!(store.revoked_ids().await.unwrap(), state.revoked);

    let records = store
        .audit_records(AuditFilter {
            kind: Some("cap.".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    let kinds: Vec<&str> = records.iter().rev().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["cap.minted", "cap.revoked", "cap.revoked"]);
    assert!(records.iter().all(|r| r.agent.as_deref() == Some("ada")));
    assert!(store.verify_audit().await.unwrap().broken.is_none());
}

async fn a_damaged_root_key_is_named_and_not_replaced(place: Place) {
    drop(place.store().await);
    let key = place.dir().join(CAP_KEY_FILE);
    std::fs::write(&key, "not a key\n").unwrap();
    let err = place.open().await.unwrap_err().to_string();
    assert!(err.contains("capability root key"), "{err}");
    assert!(err.contains("cap.key"), "{err}");
    assert_eq!(std::fs::read_to_string(&key).unwrap(), "not a key\n");
}
}
