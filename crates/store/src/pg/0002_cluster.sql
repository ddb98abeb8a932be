-- Cluster mode: the nodes that run agents, and which node owns each agent. Times are the
-- database's own clock (now()), so nodes whose clocks disagree still agree on expiry.

CREATE TABLE cluster_nodes (
    name         TEXT PRIMARY KEY,
    -- A random id per process: a restarted node, or another process under the same name, is a
    -- new incarnation, and the old one's leases are no longer its own.
    incarnation  TEXT NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The node's lease length: it counts as alive until heartbeat_at + lease.
    lease_ms     BIGINT NOT NULL CHECK (lease_ms >= 0),
    max_agents   BIGINT CHECK (max_agents >= 0),
    draining     BOOLEAN NOT NULL DEFAULT FALSE
);

CREATE TABLE agent_leases (
    agent_id     TEXT PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    node         TEXT NOT NULL,
    incarnation  TEXT NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    -- Raised at every change of owner: a fencing token an owner's writes can carry.
    epoch        BIGINT NOT NULL CHECK (epoch >= 1)
);
CREATE INDEX agent_leases_node ON agent_leases (node, incarnation);
