-- Presence: who is on a stream now, shared by the replicas. Not history: nothing here is in the
-- event log, and both tables are UNLOGGED (no WAL; after a crash of the database they are
-- empty, and every replica writes its members again when its heartbeat finds its row gone).
--
-- presence_replicas has one row per running replica process (a random id per start), renewed
-- every second or so. A row older than the replicas' TTL belongs to a replica that died: any
-- replica deletes it, and its members with it (ON DELETE CASCADE), and wakes the watchers of
-- their streams. Readers also ignore members of replicas whose row is stale, so a dead
-- replica's members never outlive its TTL.
--
-- presence_members holds, per replica, the subjects present on each stream and their
-- connections on that replica. A subject is present on a stream when any live replica has a
-- row for it. subject is COLLATE "C" so that the database orders subjects as the gateway does
-- (bytewise), which bounded lists rely on.
--
-- Changes are announced with NOTIFY on ballet_presence (payload: the sender's replica id, then
-- the changed streams, one per line); the rows are always read from the table.

CREATE UNLOGGED TABLE presence_replicas (
    id           text        PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNLOGGED TABLE presence_members (
    replica     text             NOT NULL REFERENCES presence_replicas (id) ON DELETE CASCADE,
    stream      text             NOT NULL,
    subject     text COLLATE "C" NOT NULL,
    connections integer          NOT NULL CHECK (connections > 0),
    PRIMARY KEY (stream, subject, replica)
);

CREATE INDEX presence_members_replica ON presence_members (replica);
