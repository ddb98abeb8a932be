-- How many events of the history a node's bus had not read at its last heartbeat, for
-- `reef cluster status`.
ALTER TABLE cluster_nodes ADD COLUMN bus_lag BIGINT NOT NULL DEFAULT 0;
