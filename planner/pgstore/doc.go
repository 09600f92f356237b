// Package pgstore keeps the planner in Postgres (migration 0003_planner) and carries its
// live output between replicas with LISTEN/NOTIFY.
//
// Store: sessions, transcripts, summaries and turn leases. AppendMessage numbers the message
// from its session row (whose lock serializes one transcript's appends) and inserts the
// message and its planner.message event (pglog.Insert) in one transaction. Lease expiry is
// judged by the database's clock. Turn outputs for resuming are rows of the UNLOGGED
// planner_outputs (0004_planner_resume); a turn's cut is a row there too, flagged
// (0006_planner_output_cut). AppendOutputs stores a batch with one statement (the rows from
// arrays) that also raises the leases' given offsets (0012_planner_lease_given); the table has
// no foreign key, whose check cost a WAL flush a batch (0013_planner_cheaper_writes). Renew
// and ReleaseExpired take all the leases at once, one statement each, locking rows in
// session order.
//
// Bus: Publish packs its notes into as few NOTIFY payloads on channel "ballet_planner" as fit
// (pglisten.Pack), one item a note, "<session> <note JSON>", sent in one transaction; a note
// too long for one payload is cut into fragments and reassembled. A subscriber's want sees
// the session before the JSON is decoded, so the notes of sessions it does not want cost it
// no decoding. Each Bus keeps one dedicated listening connection (internal/pglisten), named
// "ballet-gateway-planner-bus" unless the pool's connection string sets application_name,
// reconnecting with backoff; after a reconnect it delivers a Note with Lost set, since
// notifications sent meanwhile are gone. Notifications are delivered in commit order, so
// notes published one after the other arrive in that order on every replica.
package pgstore
