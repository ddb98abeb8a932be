-- What reef remembers of the secret values each agent's commands were given: a salted hash,
-- never the value, so that a later session still redacts a value it did not ask for.
CREATE TABLE secret_fingerprints (
    agent      TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    len        INTEGER NOT NULL,
    probe      INTEGER NOT NULL,
    salt       BLOB    NOT NULL,
    hash       BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (agent, hash)
);
