-- 0002: durable agents, their inboxes, and the event history of the bus.

CREATE TABLE agents (
    id           TEXT PRIMARY KEY NOT NULL,
    name         TEXT NOT NULL UNIQUE,
    template     TEXT NOT NULL,
    persona      TEXT NOT NULL,
    model        TEXT,                -- provider name; NULL = the default provider
    workspace    TEXT NOT NULL,
    capabilities TEXT NOT NULL,       -- JSON `reef_core::Capabilities`
    budget       TEXT NOT NULL,       -- JSON `reef_core::Budget`
    state        TEXT NOT NULL CHECK (state IN
                   ('pending', 'running', 'paused', 'completed', 'failed', 'terminated')),
    parent_id    TEXT REFERENCES agents (id) ON DELETE SET NULL,
    session_id   TEXT REFERENCES sessions (id) ON DELETE SET NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

-- One row per delivered message. `dedup_key` makes delivery idempotent per recipient: a
-- sender retrying after a crash delivers the same key again and gets the first row back.
CREATE TABLE inbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id     TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    sender       TEXT NOT NULL,       -- an agent name, `operator`, or `room:#name`
    body         TEXT NOT NULL,
    dedup_key    TEXT NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'processing', 'done')),
    attempts     INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at   TEXT NOT NULL,
    done_at      TEXT,
    UNIQUE (agent_id, dedup_key)
);

CREATE INDEX inbox_pending ON inbox (agent_id, status, id);

-- The bus's bounded, queryable history.
CREATE TABLE events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind         TEXT NOT NULL,
    agent_id     TEXT,                -- no foreign key: history outlives destroyed agents
    data         TEXT NOT NULL,       -- JSON
    created_at   TEXT NOT NULL
);

CREATE INDEX events_agent ON events (agent_id, seq);
