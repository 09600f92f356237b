// Package pglog is the Postgres event log: it reads the events table (streams.Log), appends
// to it (streams.Appender; Insert, inside a store's own transaction) and keeps projects and
// members (streams.ProjectStore).
//
// Open starts a listener (internal/pglisten) that LISTENs for the insert trigger's wake-ups on
// a dedicated connection, named "ballet-gateway-event-listener" unless the pool's connection
// string sets application_name; it reconnects with backoff when the connection is lost and
// wakes waiters afterwards. Wait also polls Head every PollInterval, so a lost notification
// delays delivery but never loses an event. Reads go by primary-key range with LIMIT; seq is
// assigned by the database in commit order (see the migrations package), so reading
// "seq > last" never skips an event.
//
// With Options.Tail, a pool on a streaming hot standby, the reads (Head, ReadAfter, ReadStream)
// and Wait go there and nothing listens on the primary: Wait polls the standby, replay reads
// never return a range the standby has not fully replayed, PrimaryHead reads the primary, and
// TailStatus is the standby's lag, measured once a second (tail.go, lag.go).
//
// Close stops the listener and the lag probe; the pools belong to the caller.
package pglog
