-- Instance facts (the instance id), created once with the database.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE sessions (
    id             TEXT PRIMARY KEY,
    name           TEXT,
    repo           TEXT NOT NULL,
    branch         TEXT NOT NULL,
    worktree       TEXT NOT NULL,
    runtime_kind   TEXT NOT NULL CHECK (runtime_kind IN ('tmux', 'process', 'remote')),
    -- JSON; its shape depends on runtime_kind. NULL when nothing was recorded.
    runtime_handle TEXT,
    -- JSON array of argv.
    command        TEXT NOT NULL,
    -- A secret: handed to the command, shown nowhere.
    resume_token   TEXT,
    state          TEXT NOT NULL CHECK (state IN ('spawning', 'running', 'saved', 'terminated')),
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    ended_at_ms    INTEGER,
    end_reason     TEXT,
    preserved_ref  TEXT
) STRICT;

CREATE INDEX sessions_by_state ON sessions (state);
