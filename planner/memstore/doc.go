// Package memstore is the planner's in-memory Store for `ballet-gateway dev` and tests.
//
// Sessions, transcripts, summaries and leases live here; the planner.message events go to the
// memory event log (memlog), which also says which projects exist. AppendMessage holds the
// store's mutex from numbering the message through the append of its event, and stores the
// message only when the append succeeded, so the transcript and the log agree. Lease expiry
// follows this process's clock. Everything is lost on exit.
package memstore
