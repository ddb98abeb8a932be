-- 0003: pending items (operator questions, approvals, requests waiting for a reply) and rooms.

-- One row per thing someone waits for. Lifecycle: pending -> answered | cancelled | expired.
CREATE TABLE pending (
    id           TEXT PRIMARY KEY NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('question', 'approval', 'request')),
    agent_id     TEXT,                -- who waits for the answer; NULL = the operator
    target_id    TEXT,                -- for a request: the agent asked to reply
    payload      TEXT NOT NULL,       -- JSON: question/options, tool/arguments, request text
    status       TEXT NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'answered', 'cancelled', 'expired')),
    answer       TEXT,
    followup_request TEXT,            -- a request the asker answers once this is resolved
    expires_at   INTEGER,             -- unix seconds; NULL = never
    created_at   TEXT NOT NULL,
    resolved_at  TEXT
);

CREATE INDEX pending_open ON pending (status, expires_at);

-- The request an inbox message must answer when its recipient finishes processing it.
ALTER TABLE inbox ADD COLUMN request_id TEXT;

CREATE TABLE rooms (
    name         TEXT PRIMARY KEY NOT NULL,
    created_at   TEXT NOT NULL
);

CREATE TABLE room_members (
    room         TEXT NOT NULL REFERENCES rooms (name) ON DELETE CASCADE,
    agent_id     TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    PRIMARY KEY (room, agent_id)
);

INSERT INTO rooms (name, created_at) VALUES
    ('#agents', strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    ('#control', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
