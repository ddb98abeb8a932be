-- 0009: pending items gain the kind `breakpoint`: a daemon agent's turn paused by the
-- operator's debugger before a model request or a tool call. SQLite cannot change a CHECK
-- constraint in place, so the table is rebuilt with its rows and index (nothing refers to it).
CREATE TABLE pending_new (
    id           TEXT PRIMARY KEY NOT NULL,
    kind         TEXT NOT NULL
                   CHECK (kind IN ('question', 'approval', 'request', 'breakpoint')),
    agent_id     TEXT,                -- who waits for the answer; NULL = the operator
    target_id    TEXT,                -- for a request: the agent asked to reply
    payload      TEXT NOT NULL,       -- JSON: question/options, tool/arguments, request text, stop
    status       TEXT NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'answered', 'cancelled', 'expired')),
    answer       TEXT,
    followup_request TEXT,            -- a request the asker answers once this is resolved
    expires_at   INTEGER,             -- unix seconds; NULL = never
    created_at   TEXT NOT NULL,
    resolved_at  TEXT
);

INSERT INTO pending_new (id, kind, agent_id, target_id, payload, status, answer,
                         followup_request, expires_at, created_at, resolved_at)
SELECT id, kind, agent_id, target_id, payload, status, answer,
       followup_request, expires_at, created_at, resolved_at
FROM pending;

DROP TABLE pending;
ALTER TABLE pending_new RENAME TO pending;
CREATE INDEX pending_open ON pending (status, expires_at);
