-- Long-term memory: items in a namespace ("agent:NAME" or "shared"), split into chunks that
-- are indexed for keyword search (FTS5, BM25 ranking). Chunks cascade with their item; the
-- FTS index follows the chunks through triggers.
CREATE TABLE memory_items (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]',
    source TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX memory_items_namespace ON memory_items (namespace, created_at);

CREATE TABLE memory_chunks (
    id INTEGER PRIMARY KEY,
    item_id INTEGER NOT NULL REFERENCES memory_items (id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (item_id, ordinal)
);

CREATE VIRTUAL TABLE memory_fts USING fts5 (
    text,
    content = 'memory_chunks',
    content_rowid = 'id',
    tokenize = 'porter unicode61'
);

CREATE TRIGGER memory_chunks_insert AFTER INSERT ON memory_chunks BEGIN
    INSERT INTO memory_fts (rowid, text) VALUES (new.id, new.text);
END;

CREATE TRIGGER memory_chunks_delete AFTER DELETE ON memory_chunks BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
