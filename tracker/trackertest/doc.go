// Package trackertest is the suite every tracker.Store passes (Run), driven through
// tracker.Service against a fresh store and its event log: projects and members, item CRUD
// and numbering, versions and preconditions, dependencies (self, cycles, cross-project,
// idempotency), delete cascades, the events of every write with their payloads and actors,
// failed writes appending nothing, and the snapshot's seq under concurrent writers.
//
// Replica is a client's copy of a project's items kept by applying events, as the client
// recipe of the realtime API does; the suite and end-to-end tests use it to check that events
// carry everything a client needs.
package trackertest
