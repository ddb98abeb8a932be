-- The rooms every store starts with, as SQLite's migration 3 makes them.
INSERT INTO rooms (name, created_at) VALUES
    ('#agents', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
    ('#control', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
ON CONFLICT (name) DO NOTHING;
