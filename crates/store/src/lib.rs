//! reef-store: reef's persistence: SQLite (WAL) with migrations for sessions, messages and model usage.
