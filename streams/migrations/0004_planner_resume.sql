-- Resumable planner output, idempotent sends, and cancels that survive a lost notification.
--
-- planner_outputs keeps each turn's outputs, numbered 1, 2, 3, ... within the turn ("offset"),
-- so that a watcher that reconnects, on any replica, resumes where it was. It is UNLOGGED: it
-- is a cache of live output, not history (the transcript is in planner_messages); after a crash
-- of the database it is empty, and resuming watchers reload the transcript, as they would
-- without it. Rows of a turn are removed once its done is older than the resume window.
-- The output is json, not jsonb: replayed output is byte for byte what went out live.
--
-- planner_sends remembers planner.send's idempotency keys for a day: the same key from the
-- same subject on the same session answers the first send's seq and starts nothing.
--
-- planner_leases.cancel_requested: planner.cancel also marks the lease, which the replica
-- running the turn reads as it renews the lease, so a cancel whose notification was lost (the
-- listening connection was being re-established) still stops the turn.

CREATE UNLOGGED TABLE planner_outputs (
    session_id uuid        NOT NULL REFERENCES planner_sessions (id) ON DELETE CASCADE,
    turn       text        NOT NULL,
    "offset"   bigint      NOT NULL CHECK ("offset" > 0),
    output     json        NOT NULL,
    done       boolean     NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, turn, "offset")
);

CREATE INDEX planner_outputs_created ON planner_outputs (created_at);

CREATE TABLE planner_sends (
    session_id      uuid        NOT NULL REFERENCES planner_sessions (id) ON DELETE CASCADE,
    subject         text        NOT NULL,
    idempotency_key text        NOT NULL CHECK (char_length(idempotency_key) BETWEEN 1 AND 64),
    seq             bigint      NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, subject, idempotency_key)
);

CREATE INDEX planner_sends_created ON planner_sends (created_at);

ALTER TABLE planner_leases ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;
