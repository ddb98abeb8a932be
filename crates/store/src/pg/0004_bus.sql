-- Whether each node reaches the others over NATS; without it, nodes poll the database for work
-- (slower, still correct), and `reef cluster status` says so.
ALTER TABLE cluster_nodes ADD COLUMN bus_connected BOOLEAN NOT NULL DEFAULT TRUE;
