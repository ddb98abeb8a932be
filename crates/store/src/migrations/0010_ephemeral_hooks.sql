-- 0010: agents that are destroyed once their task is done (webhook and per-request agents),
-- and the webhook signatures already accepted, so a replayed delivery is refused.
ALTER TABLE agents ADD COLUMN ephemeral INTEGER NOT NULL DEFAULT 0;

CREATE TABLE hook_deliveries (
    signature    TEXT PRIMARY KEY NOT NULL,  -- the hook's name and the signature, hex
    hook         TEXT NOT NULL,
    received_at  TEXT NOT NULL
);
CREATE INDEX hook_deliveries_age ON hook_deliveries (received_at);
