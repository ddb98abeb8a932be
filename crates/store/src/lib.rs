//! reef-store: reef's persistence: SQLite (WAL) with migrations for sessions, messages and model usage.
//!
//! Open a [`Store`] with [`Store::open`]; every write is its own committed transaction, so a
//! process killed mid-turn loses nothing already appended.

mod clock;
mod codec;
mod error;
mod messages;
mod migrations;
mod records;
mod sessions;
mod store;
mod usage;

pub use error::StoreError;
pub use records::{
    NewSession, NewUsage, SessionRecord, SessionSummary, StoredMessage, UsageRecord,
};
pub use store::Store;
