//! reef-store integration tests: one binary, one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

mod agents;
mod audit;
mod compactions;
mod fingerprints;
mod memory;
mod messages;
mod open;
mod pending;
#[cfg(feature = "postgres")]
mod postgres;
mod recall;
mod routines;
mod session_search;
mod sessions;
mod tokens;
mod usage;

use reef_core::SessionId;
use reef_store::{NewSession, Store};

/// A new-session request with a fixed id.
pub fn new_session(id: &str) -> NewSession {
    NewSession {
        id: SessionId::from(id),
        agent: Some("main".into()),
        workspace: "/tmp/ws".into(),
        provider: "openai".into(),
        model: "gpt-test".into(),
    }
}

/// An in-memory store holding one session with the given id.
pub async fn store_with(id: &str) -> (Store, SessionId) {
    let store = Store::open_in_memory().unwrap();
    let rec = store.create_session(new_session(id)).await.unwrap();
    (store, rec.id)
}
