-- The event log shared with the rest of Core, and the projects it is organised by.
--
-- seq is assigned by the database, strictly increasing in COMMIT order: the BEFORE INSERT
-- trigger takes a transaction-scoped advisory lock before drawing the next value, so event
-- inserting transactions are serialized from their first event to their commit. A reader that
-- has seen seq N can therefore never later see an event with a smaller seq. (Postgres makes a
-- transaction visible before it releases its locks, so the next writer's seq is drawn only after
-- the previous commit is visible.) Writers should insert their events late in the transaction:
-- the lock is held until commit.

CREATE SEQUENCE events_seq AS bigint;

CREATE TABLE events (
    seq           bigint      PRIMARY KEY, -- set by events_assign_seq; any value given is replaced
    project_key   text        NOT NULL,
    type          text        NOT NULL,
    entity_type   text        NOT NULL,
    entity_id     text        NOT NULL,
    entity_key    text        NULL,
    occurred_at   timestamptz NOT NULL DEFAULT now(),
    actor_kind    text        NOT NULL,
    actor_subject text        NOT NULL,
    payload       jsonb       NOT NULL DEFAULT '{}'
);

ALTER SEQUENCE events_seq OWNED BY events.seq;

-- Stream reads: project:<KEY> and item:<KEY>, by seq range.
CREATE INDEX events_project_seq ON events (project_key, seq);
CREATE INDEX events_item_seq ON events (entity_key, seq) WHERE entity_type = 'item';

CREATE FUNCTION events_assign_seq() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Fixed key (0x62616c6c65740001) serializing event inserts until commit.
    PERFORM pg_advisory_xact_lock(7089066501272240129);
    NEW.seq := nextval(format('%I.events_seq', TG_TABLE_SCHEMA)::regclass);
    RETURN NEW;
END
$$;

CREATE TRIGGER events_assign_seq BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION events_assign_seq();

-- A wake-up only: the empty payload lets Postgres fold a transaction's notifications into one;
-- readers always read the rows from the table.
CREATE FUNCTION events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ballet_events', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_notify();

CREATE TABLE projects (
    key        text        PRIMARY KEY CHECK (key ~ '^[A-Z][A-Z0-9]{0,19}$'),
    name       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text        NOT NULL DEFAULT ''
);

CREATE TABLE project_members (
    project_key text REFERENCES projects (key) ON DELETE CASCADE,
    subject     text,
    role        text NOT NULL CHECK (role IN ('viewer', 'member', 'admin')),
    PRIMARY KEY (project_key, subject)
);
