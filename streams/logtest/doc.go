// Package logtest is the conformance suite every streams.Log implementation passes: Run
// checks heads, appends, tail and stream reads with their bounds, payload and NULL handling,
// Wait's wake-ups and, when the log is also a streams.ProjectStore, projects and members.
//
// Each subtest opens its own empty log through the given function.
package logtest
