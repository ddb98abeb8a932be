-- Scoped API tokens made with `reef token create`: only the SHA-256 of a token is kept. A
-- revoked token stays listed (with when) so its id keeps meaning one thing in the audit log.
CREATE TABLE api_tokens (
    id         TEXT PRIMARY KEY NOT NULL,   -- the hash's first 12 hex digits, public
    name       TEXT NOT NULL UNIQUE,
    scope      TEXT NOT NULL,               -- operator | read-only | agent:NAME
    hash       TEXT NOT NULL UNIQUE,        -- SHA-256 of the token, hex
    rate       INTEGER,                     -- requests per minute; NULL: daemon.rate_limit
    created_at TEXT NOT NULL,
    revoked_at TEXT
) STRICT;
