-- 0006: vectors for memory chunks, the agent a session belongs to, and full-text search over
-- what was said in sessions.

-- The vector of a chunk and the embedder (`Embedder::id`) that made it; NULL until embedded.
-- Vectors are little-endian f32s of unit length.
ALTER TABLE memory_chunks ADD COLUMN embedder TEXT;
ALTER TABLE memory_chunks ADD COLUMN embedding BLOB;
CREATE INDEX memory_chunks_embedder ON memory_chunks (embedder);

-- The agent whose transcript a session is (`main` for `reef run` and `reef chat`).
ALTER TABLE sessions ADD COLUMN agent TEXT;
CREATE INDEX sessions_agent ON sessions (agent, updated_at);

-- User and assistant messages, indexed for session search. A table of its own (not external
-- content): `messages` has no stable integer key to point at.
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content,
    session_id UNINDEXED,
    seq UNINDEXED,
    tokenize = 'porter unicode61'
);

INSERT INTO messages_fts (content, session_id, seq)
    SELECT content, session_id, seq FROM messages
    WHERE role IN ('user', 'assistant') AND content <> '';

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
    WHEN new.role IN ('user', 'assistant') AND new.content <> '' BEGIN
    INSERT INTO messages_fts (content, session_id, seq)
        VALUES (new.content, new.session_id, new.seq);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE session_id = old.session_id AND seq = old.seq;
END;
