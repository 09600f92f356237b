-- planner_leases.given is the highest offset of output the turn holding the lease gave out:
-- every batch of outputs a replica writes raises it, in the same statement, before the batch
-- is sent to any watcher. The replica that ends a turn whose replica died numbers its error
-- and done after it, so that they follow every output a watcher saw, even past the turn's
-- kept-output bound, where no row holds those outputs. A lease taken over starts again at 0.
-- Replicas of an earlier version leave it at 0: their turns end after the highest stored offset.

ALTER TABLE planner_leases ADD COLUMN given bigint NOT NULL DEFAULT 0;
