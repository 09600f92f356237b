-- planner_leases.subject is the person whose message started the turn holding the lease. A
-- replica taking a lease counts that person's unexpired leases in the same statement, inside a
-- transaction holding an advisory lock of the person (pg_advisory_xact_lock(0x6274,
-- hashtext(subject))), so that the replicas together never run more of one person's turns at once
-- than BALLET_PLANNER_TURNS_PER_SUBJECT. Leases of replicas of an earlier version have '' and
-- count for no one.

ALTER TABLE planner_leases ADD COLUMN subject text NOT NULL DEFAULT '';

CREATE INDEX planner_leases_subject ON planner_leases (subject, expires_at);
