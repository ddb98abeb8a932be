//! Secret fingerprints, on both backends: kept per agent, survive a reopen, and a known one is not duplicated.

use reef_core::SecretFingerprint;

fn fingerprint(name: &str, hash: u8) -> SecretFingerprint {
    SecretFingerprint {
        name: name.into(),
        len: 20,
        probe: 0xdead_beef,
        salt: vec![1; 16],
        hash: vec![hash; 32],
    }
}

both! {
async fn fingerprints_are_kept_per_agent_across_a_reopen(place: Place) {
    let store = place.store().await;
    let a = fingerprint("TOKEN", 7);
    store
        .add_secret_fingerprints("alice", std::slice::from_ref(&a))
        .await
        .unwrap();
    store
        .add_secret_fingerprints("alice", &[a.clone(), fingerprint("OTHER", 8)])
        .await
        .unwrap();
    store
        .add_secret_fingerprints("bob", &[fingerprint("BOBS", 9)])
        .await
        .unwrap();
    drop(store);
    let store = place.store().await;
    let alice = store.secret_fingerprints("alice").await.unwrap();
    assert_eq!(alice, vec![a, fingerprint("OTHER", 8)]);
    let bob = store.secret_fingerprints("bob").await.unwrap();
    assert_eq!(bob, vec![fingerprint("BOBS", 9)]);
    assert!(store.secret_fingerprints("carol").await.unwrap().is_empty());
}
}
