-- Operators' listings of connections (GET /api/v1/admin/connections, `ballet-gateway admin
-- connections`): replicas need not reach each other but all reach the database, so a listing
-- is asked and answered here. Not history, and both tables are UNLOGGED: a row lives for the
-- seconds of one listing.
--
-- The asker inserts a row into connection_listings and, in the same transaction, sends NOTIFY
-- on ballet_connection_listings ("ask", the listing's id, its limit and its subject filter, one
-- per line). Each replica (those of presence_replicas) inserts its answer, the JSON array of
-- its connections, into connection_listing_answers and sends NOTIFY ("answer", the listing's
-- id, its replica id). After 2 s at most the asker reads the answers and deletes its listing,
-- and the answers with it (ON DELETE CASCADE): a late answer finds no listing and is refused.
-- An asker that died leaves its row behind until the next listing removes it.

CREATE UNLOGGED TABLE connection_listings (
    id       text        PRIMARY KEY,
    asked_at timestamptz NOT NULL DEFAULT now()
);

CREATE UNLOGGED TABLE connection_listing_answers (
    listing     text    NOT NULL REFERENCES connection_listings (id) ON DELETE CASCADE,
    replica     text    NOT NULL,
    truncated   boolean NOT NULL,
    connections bytea   NOT NULL,
    PRIMARY KEY (listing, replica)
);
