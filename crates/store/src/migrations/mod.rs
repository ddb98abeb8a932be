//! The schema history: numbered SQL migrations embedded in the binary, applied in order at open.

use rusqlite_migration::{M, Migrations};

/// Every migration, oldest first. Append new files here; never edit or reorder a shipped one.
const ALL: &[M<'static>] = &[
    M::up(include_str!("0001_sessions.sql")),
    M::up(include_str!("0002_agents.sql")),
    M::up(include_str!("0003_pending_rooms.sql")),
    M::up(include_str!("0004_usage_cost.sql")),
    M::up(include_str!("0005_memory.sql")),
    M::up(include_str!("0006_vectors_sessions.sql")),
    M::up(include_str!("0007_secret_fingerprints.sql")),
    M::up(include_str!("0008_compactions.sql")),
    M::up(include_str!("0009_breakpoints.sql")),
    M::up(include_str!("0010_ephemeral_hooks.sql")),
    M::up(include_str!("0011_routines_jobs.sql")),
    M::up(include_str!("0012_audit.sql")),
    M::up(include_str!("0013_capabilities.sql")),
    M::up(include_str!("0014_api_tokens.sql")),
    M::up(include_str!("0015_channel_cursors.sql")),
    M::up(include_str!("0016_session_tool_results.sql")),
];

/// The migration set, ready for `to_latest`.
pub(crate) const MIGRATIONS: Migrations<'static> = Migrations::from_slice(ALL);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_valid() {
        assert!(MIGRATIONS.validate().is_ok());
        assert_eq!(ALL.len(), 16);
    }
}
