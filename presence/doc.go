// Package presence tells who is on a stream now: a subject is present on a stream
// (project:<KEY>, item:<KEY>) while it holds at least one presence subscription to it, on
// any connection of any replica, and watchers hear of subjects joining and leaving.
//
// Entry points: New returns a Registry, the replica's presence; Registry.Join makes a
// subject present for one subscription and delivers presence changes to its Sink until
// Presence.Leave; Registry.Members answers presence.get. A Store (package pgpresence) shares
// presence between replicas; without one, presence is the process's own (the dev server).
//
// Changes are coalesced per stream over Options.Window: a subject that leaves and comes back
// within it produces nothing (it is reported left after two windows), and a watcher gets at
// most one change per stream and window (in chunks of at most ChunkSize subjects). Lists are bounded by Options.MaxMembers: the
// first subjects in bytewise order. Sinks are called from one goroutine, never with a lock
// of the registry held.
package presence
