-- Session search covers tool results too ("what did the build say yesterday" finds the
-- command's output). They are stored with secret values already redacted, so the index holds
-- nothing the transcript does not.
DROP TRIGGER messages_fts_insert;

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
    WHEN new.role IN ('user', 'assistant', 'tool') AND new.content <> '' BEGIN
    INSERT INTO messages_fts (content, session_id, seq)
        VALUES (new.content, new.session_id, new.seq);
END;

INSERT INTO messages_fts (content, session_id, seq)
    SELECT content, session_id, seq FROM messages
    WHERE role = 'tool' AND content <> '';
