-- 0012: the audit log, append-only and hash-chained: each record's hash is a keyed hash of
-- the previous record's hash and its own fields (reef-security's `audit`), the key kept
-- outside the database. Pruning removes the oldest records and leaves one checkpoint: the
-- last removed record's seq and hash, sealed with the key, where verification starts.
CREATE TABLE audit (
    seq        INTEGER PRIMARY KEY NOT NULL,
    at         TEXT NOT NULL,
    kind       TEXT NOT NULL,
    agent      TEXT,                 -- the agent's name when it was written
    data       TEXT NOT NULL,        -- JSON
    prev       TEXT NOT NULL,        -- hex hash of the record before
    hash       TEXT NOT NULL         -- hex hash of this record
) STRICT;
CREATE INDEX audit_kind ON audit (kind, seq);
CREATE INDEX audit_agent ON audit (agent, seq);

CREATE TABLE audit_checkpoint (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    seq        INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    seal       TEXT NOT NULL,
    pruned_at  TEXT NOT NULL
) STRICT;
