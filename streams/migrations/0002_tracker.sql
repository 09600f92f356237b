-- The tracker: items numbered per project, and dependencies between items of one project.
--
-- An item's key is "<project_key>-<number>"; numbers come from project_counters, whose row is
-- also the per-project lock that serializes dependency changes and deletions (the cycle check
-- must see every concurrent change). Writers append their events to the events table in the
-- same transaction as the change.

CREATE TABLE project_counters (
    project_key text   PRIMARY KEY REFERENCES projects (key) ON DELETE CASCADE,
    last_number bigint NOT NULL DEFAULT 0
);

CREATE TABLE items (
    id          uuid        PRIMARY KEY,
    project_key text        NOT NULL REFERENCES projects (key) ON DELETE CASCADE,
    number      bigint      NOT NULL CHECK (number > 0),
    key         text        GENERATED ALWAYS AS (project_key || '-' || number::text) STORED UNIQUE,
    title       text        NOT NULL CHECK (title <> '' AND char_length(title) <= 200),
    description text        NOT NULL DEFAULT '' CHECK (char_length(description) <= 20000),
    state       text        NOT NULL DEFAULT 'backlog' CHECK (state IN ('backlog', 'ready', 'in_progress', 'done')),
    version     bigint      NOT NULL DEFAULT 1 CHECK (version > 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    created_by  text        NOT NULL DEFAULT '',
    UNIQUE (project_key, number),
    UNIQUE (project_key, id)
);

-- blocker_id blocks blocked_id; both in project_key (the composite keys enforce it).
CREATE TABLE item_dependencies (
    project_key text        NOT NULL,
    blocker_id  uuid        NOT NULL,
    blocked_id  uuid        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (blocked_id, blocker_id),
    CHECK (blocker_id <> blocked_id),
    FOREIGN KEY (project_key, blocker_id) REFERENCES items (project_key, id) ON DELETE CASCADE,
    FOREIGN KEY (project_key, blocked_id) REFERENCES items (project_key, id) ON DELETE CASCADE
);

CREATE INDEX item_dependencies_blocker ON item_dependencies (blocker_id);
