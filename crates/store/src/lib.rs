//! reef-store: reef's persistence: SQLite (WAL) with migrations for sessions (which can be
//! forked), messages, context compactions, model usage, durable agents, their inboxes, the
//! event history, the hash-chained audit log, routines with their fires and jobs, and long-term memory (chunked, keyword-searchable with BM25).
//!
//! Open a [`Store`] with [`Store::open`]; every write is its own committed transaction, so a
//! process killed mid-turn loses nothing already appended.

mod agents;
mod api_tokens;
mod audit;
mod channel_cursors;
mod chunk;
mod clock;
mod codec;
mod compactions;
mod copy;
mod error;
mod events;
mod fingerprints;
mod fires;
mod fusion;
mod hooks;
mod inbox;
mod jobs;
mod key_file;
mod memory;
mod messages;
mod migrations;
mod nibbles;
mod pending;
mod pg;
mod private;
mod query_cache;
mod recall;
mod records;
mod rooms;
mod routines;
mod sessions;
mod sql;
mod store;
mod tokens;
mod transcripts;
mod usage;
mod vector_index;
mod vectors;
mod vectors_pgvector;
mod word_counts;

pub use agents::{AgentRecord, NewAgent};
pub use api_tokens::{ApiTokenRecord, NewApiToken};
pub use audit::{AuditFilter, AuditRecord, AuditVerdict};
pub use chunk::chunks;
pub use clock::{start_of_today, timestamp_ago, unix_now};
pub use compactions::{CompactionRecord, NewCompaction};
pub use copy::Copied;
pub use error::StoreError;
pub use events::{EventFilter, StoredEvent};
pub use fingerprints::{LastSecretUse, SecretUse};
pub use fires::{ClaimGuard, Claimed, FireClaim, FireEffect, FireRecord};
pub use fusion::{
    EVIDENCE_IDENTIFIER_WEIGHT, EVIDENCE_KEYWORD_WEIGHT, Fusion, FusionMethod, QueryTerms,
    RRF_KEYWORD_WEIGHT, fuse,
};
pub use inbox::{Delivery, InboxMessage, InboxStatus, Letter};
pub use jobs::{JOB_STATES, JobEnd, JobKind, JobRecord, JobState, REPORT_ROOM};
pub use key_file::{AUDIT_KEY_FILE, CAP_KEY_FILE, KeyError, KeyKind, audit_key_path, cap_key_path};
pub use memory::{
    Chunking, MemoryHit, MemoryItem, MemoryQuery, NewMemory, SHARED_NAMESPACE, check_namespace,
};
pub use pending::{NewPending, PendingItem, PendingKind, PendingStatus};
pub use pg::{AgentLease, ClusterNode, NodeStatus, PgError, PgStore};
pub use recall::{EmbedFailure, Memory, Saved, SearchMode, SearchOutcome, SearchRequest};
pub use records::{
    CostRow, DailyCost, NewSession, NewUsage, SessionRecord, SessionSummary, StoredMessage,
    UsageRecord,
};
pub use reef_security::audit::ChainBreak;
pub use rooms::RoomRecord;
pub use routines::{NewRoutine, PutOutcome, RoutineRecord, RoutineSource};
pub use store::Store;
pub use tokens::CapabilityState;
pub use transcripts::SessionHit;
pub use vector_index::{APPROXIMATE_FROM, Scan, VectorMatrix, reranked_for};
pub use vectors::{VectorCoverage, VectorLoads, VectorQuery, dot};
