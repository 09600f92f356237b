-- The planner: sessions, their transcripts, summaries of older messages, and turn leases.
--
-- A message's seq is its position in its session's transcript (1, 2, 3, ...), drawn from the
-- session row's last_seq, whose row lock also serializes appends to one transcript. Writers
-- append a planner.message event in the same transaction as the message.
--
-- planner_leases holds at most one row per session: the replica running its turn, until
-- expires_at (renewed while the turn runs). A row is taken with an atomic upsert that only
-- replaces an expired row, and compared with the database's clock, so that one turn runs per
-- session across all replicas.

CREATE TABLE planner_sessions (
    id          uuid        PRIMARY KEY,
    project_key text        NOT NULL REFERENCES projects (key) ON DELETE CASCADE,
    title       text        NOT NULL DEFAULT '' CHECK (char_length(title) <= 200),
    created_by  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    last_seq    bigint      NOT NULL DEFAULT 0 CHECK (last_seq >= 0)
);

CREATE INDEX planner_sessions_project ON planner_sessions (project_key, created_at DESC, id DESC);

CREATE TABLE planner_messages (
    session_id uuid        NOT NULL REFERENCES planner_sessions (id) ON DELETE CASCADE,
    seq        bigint      NOT NULL CHECK (seq > 0),
    role       text        NOT NULL CHECK (role IN ('human', 'assistant', 'tool')),
    content    jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);

-- A summary stands for the session's messages with seq <= upto_seq in later model calls.
CREATE TABLE planner_summaries (
    session_id uuid        NOT NULL REFERENCES planner_sessions (id) ON DELETE CASCADE,
    upto_seq   bigint      NOT NULL CHECK (upto_seq > 0),
    summary    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, upto_seq)
);

CREATE TABLE planner_leases (
    session_id uuid        PRIMARY KEY REFERENCES planner_sessions (id) ON DELETE CASCADE,
    owner      text        NOT NULL,
    expires_at timestamptz NOT NULL
);
