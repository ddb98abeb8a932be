-- 0001: sessions, their messages, and per-model-request token usage.

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY NOT NULL,
    title      TEXT,
    workspace  TEXT NOT NULL,
    provider   TEXT NOT NULL,
    model      TEXT NOT NULL,
    created_at TEXT NOT NULL,  -- RFC3339 UTC, millisecond precision
    updated_at TEXT NOT NULL
);

CREATE INDEX sessions_updated_at ON sessions (updated_at);

-- One row per message; the columns mirror `reef_core::Message` so SQL and
-- (later) full-text search can see the text. The primary key doubles as the
-- index on session_id.
CREATE TABLE messages (
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL CHECK (seq >= 1),
    role         TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content      TEXT NOT NULL,
    tool_calls   TEXT,           -- JSON array of tool calls (assistant only), NULL when none
    tool_call_id TEXT,           -- tool messages only
    tool_name    TEXT,           -- tool messages only
    is_error     INTEGER NOT NULL DEFAULT 0 CHECK (is_error IN (0, 1)),
    created_at   TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE model_usage (
    id                  INTEGER PRIMARY KEY,
    session_id          TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    round               INTEGER NOT NULL,
    provider            TEXT NOT NULL,
    model               TEXT NOT NULL,
    input_tokens        INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    created_at          TEXT NOT NULL
);

CREATE INDEX model_usage_session_id ON model_usage (session_id);
