-- Capability tokens: each agent's token (biscuit, URL-safe base64, signed by `cap.key`), and
-- the revocation ids of blocks that no longer grant anything. A token holding any revoked id
-- fails every check, so revoking a parent's block fails its descendants too.
ALTER TABLE agents ADD COLUMN token TEXT;

CREATE TABLE cap_revoked (
    id     TEXT PRIMARY KEY NOT NULL,   -- a block's revocation id, hex
    agent  TEXT NOT NULL,               -- the agent whose token held it when it was revoked
    reason TEXT NOT NULL,
    at     TEXT NOT NULL
) STRICT;
