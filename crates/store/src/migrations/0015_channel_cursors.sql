-- Where a channel with a replayable feed (a bot API's updates) resumes: the cursor after the
-- last message the gateway handled, so a restart neither loses nor repeats one.
CREATE TABLE channel_cursors (
    channel    TEXT PRIMARY KEY NOT NULL,   -- the [channels.NAME] table's name
    cursor     TEXT NOT NULL,
    updated_at TEXT NOT NULL
) STRICT;
