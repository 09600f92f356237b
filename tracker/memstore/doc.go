// Package memstore is the tracker's in-memory Store for `ballet-gateway dev` and tests.
//
// Projects and members live in the memory event log (memlog), which the gateway also asks for
// roles; items and dependencies live here. Every write holds the store's mutex from its checks
// through the append of its events to the log and the change of its state, and a snapshot
// reads the items and the log's head under the same mutex, so the snapshot's seq is exact.
// A write whose append fails changes nothing. Everything is lost on exit.
package memstore
