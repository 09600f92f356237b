-- The cut of a turn's output. Past its bounds (10,000 outputs or 1 MiB by default), a turn's
-- further outputs, but its error and done, go out live only. The first output not kept stores,
-- in its place, one row with cut set and output JSON null: resuming reads it to tell a watcher
-- that output it lacks is missing (while the turn runs, or when the offsets after the watcher's
-- reach the hole), and never delivers it. It goes with the turn's other rows when they expire.
-- A replica of an earlier version reads the row as an output without an offset, which breaks
-- the run of offsets it checks, so it does not resume across the cut either.

ALTER TABLE planner_outputs
    ADD COLUMN cut boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT planner_outputs_cut_not_done CHECK (NOT (cut AND done));

CREATE UNIQUE INDEX planner_outputs_cut ON planner_outputs (session_id, turn) WHERE cut;
