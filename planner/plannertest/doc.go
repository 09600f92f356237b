// Package plannertest is the suite every planner.Store passes: sessions and their paged
// listing, transcripts with
// their planner.message events, summaries and turn leases, including concurrent appends and
// concurrent takeovers of an expired lease; turn outputs with their cut and expiry, and
// idempotency keys.
//
//	plannertest.Run(t, func(t *testing.T) plannertest.Env { ... })
package plannertest
