-- 0008: compactions: which stretch of a session's messages was replaced in its context (by a
-- summary, or dropped), when, and why. The messages themselves stay; these rows say how the
-- context differs from the transcript. They go with their session (ON DELETE CASCADE), as
-- its messages do.
CREATE TABLE compactions (
    id            INTEGER PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    after_seq     INTEGER NOT NULL,   -- the session's last message seq when this was recorded
    from_seq      INTEGER NOT NULL,   -- first replaced message (inclusive)
    to_seq        INTEGER NOT NULL,   -- last replaced message (inclusive)
    strategy      TEXT NOT NULL,      -- `reef_core::CompactionStrategy::as_str`
    trigger       TEXT NOT NULL,      -- `reef_core::CompactionTrigger`, snake_case
    summary       TEXT,               -- NULL when the messages were dropped
    tokens_before INTEGER NOT NULL,   -- estimated context size before and after, in tokens
    tokens_after  INTEGER NOT NULL,
    window        INTEGER NOT NULL,   -- the model's context window, in tokens
    created_at    TEXT NOT NULL,
    CHECK (1 <= from_seq AND from_seq <= to_seq AND to_seq <= after_seq)
);

CREATE INDEX compactions_session ON compactions (session_id, id);
