-- 0011: routines (work given by the clock, an event, a webhook or the operator), every fire
-- of one claimed under its identity (routine, key) so it happens once, and jobs: routine runs
-- and agent turns with their states.
CREATE TABLE routines (
    id               TEXT PRIMARY KEY NOT NULL,
    name             TEXT NOT NULL UNIQUE,
    spec             TEXT NOT NULL,        -- reef_core::RoutineSpec as JSON
    enabled          INTEGER NOT NULL DEFAULT 1,
    source           TEXT NOT NULL,        -- config | operator | agent | template
    owner_id         TEXT REFERENCES agents (id) ON DELETE CASCADE,
    max_failures     INTEGER NOT NULL,
    failures         INTEGER NOT NULL DEFAULT 0,
    disabled_reason  TEXT,
    anchor_ms        INTEGER NOT NULL,     -- intervals count from here
    watermark_ms     INTEGER NOT NULL,     -- every timed fire at or before this is settled
    last_run_ms      INTEGER,              -- the latest run's start, for cooldowns
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);

CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY,
    kind         TEXT NOT NULL,            -- routine | turn | heartbeat
    state        TEXT NOT NULL,            -- pending | running | completed | failed | cancelled
    routine_id   TEXT REFERENCES routines (id) ON DELETE SET NULL,
    routine      TEXT,                     -- the routine's name, kept when it is deleted
    agent_id     TEXT,                     -- no foreign key: the record outlives the agent
    agent_name   TEXT,
    inbox_id     INTEGER,
    scheduled_ms INTEGER,
    deadline_ms  INTEGER,
    reason       TEXT,
    result       TEXT,
    created_at   TEXT NOT NULL,
    started_at   TEXT,
    ended_at     TEXT,
    progress_at  TEXT NOT NULL
);
CREATE INDEX jobs_open ON jobs (routine_id, id) WHERE state IN ('pending', 'running');
CREATE INDEX jobs_to_advance ON jobs (id)
    WHERE state = 'pending' OR (state = 'running' AND deadline_ms IS NOT NULL);
CREATE INDEX jobs_running ON jobs (started_at) WHERE state = 'running';
CREATE INDEX jobs_agent ON jobs (agent_id) WHERE state IN ('pending', 'running');
CREATE INDEX jobs_agent_name ON jobs (agent_name, id);
CREATE INDEX jobs_ended ON jobs (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX jobs_inbox ON jobs (inbox_id) WHERE inbox_id IS NOT NULL;
CREATE INDEX jobs_routine ON jobs (routine_id, id);

CREATE TABLE routine_fires (
    routine_id    TEXT NOT NULL REFERENCES routines (id) ON DELETE CASCADE,
    fire_key      TEXT NOT NULL,           -- at:MS | event:SEQ | hook:SIGNATURE | manual:ID
    scheduled_ms  INTEGER NOT NULL,
    outcome       TEXT NOT NULL,           -- run | skipped
    reason        TEXT,
    job_id        INTEGER REFERENCES jobs (id),
    claimed_at    TEXT NOT NULL,
    PRIMARY KEY (routine_id, fire_key)
);
CREATE INDEX routine_fires_time ON routine_fires (routine_id, scheduled_ms);
CREATE INDEX routine_fires_claimed ON routine_fires (claimed_at);

-- Where the scheduler's event listener has read the history up to, so events committed
-- before a restart still fire their routines.
CREATE TABLE scheduler_cursor (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    seq   INTEGER NOT NULL
);
