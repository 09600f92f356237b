// Package memlog is an in-memory event log for `ballet-gateway dev` and tests: it behaves like
// the Postgres log (pglog) — streams.Log, streams.Appender and streams.ProjectStore — without a
// database. Seq is assigned under one lock, so seq order is append order; Wait wakes on Append.
//
// Everything lives in process memory and is lost on exit; nothing is shared between
// processes, so it suits exactly one gateway. Close wakes blocked Waits with streams.ErrClosed.
package memlog
