-- Windows, their warm slots, and the leases that hold slots (LEAK-003).
--
-- No foreign keys between these tables on purpose: a slot whose window row is gone, or a lease
-- whose slot is gone, is exactly what the pool pass must find and reconcile after a crash, so the
-- schema must be able to hold it.
CREATE TABLE windows (
    id            TEXT PRIMARY KEY,
    name          TEXT,
    repo          TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('open', 'closing', 'closed')),
    -- How many free slots the pool keeps ready.
    target        INTEGER NOT NULL CHECK (target >= 0),
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE slots (
    id            TEXT PRIMARY KEY,
    -- NULL when no window was ever recorded for it.
    window_id     TEXT,
    repo          TEXT NOT NULL,
    worktree      TEXT NOT NULL UNIQUE,
    branch        TEXT NOT NULL,
    -- The commit the branch was created at.
    base          TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('provisioning', 'free', 'leased', 'used', 'retired')),
    session_id    TEXT,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
) STRICT;

CREATE INDEX slots_by_window ON slots (window_id, state);

CREATE TABLE leases (
    id           TEXT PRIMARY KEY,
    slot_id      TEXT NOT NULL,
    owner        TEXT NOT NULL,
    -- The session that holds it, for the leases the daemon holds and renews for its sessions.
    session_id   TEXT,
    heartbeat_ms INTEGER NOT NULL,
    ttl_ms       INTEGER NOT NULL,
    acquired_ms  INTEGER NOT NULL
) STRICT;

CREATE INDEX leases_by_slot ON leases (slot_id);
