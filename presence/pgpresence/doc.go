// Package pgpresence shares presence between replicas through Postgres (migration
// 0005_presence): a presence.Store.
//
// Each Store is one replica process: Open inserts its row in presence_replicas (a random id)
// and renews it every TTL/5 (heartbeat), and Flush writes its members to presence_members,
// one row per stream and subject with its connection count, in one transaction per call with
// one NOTIFY on channel "ballet_presence" naming the streams where a subject appeared or
// vanished. Both tables are UNLOGGED: presence is not history.
//
// A replica whose row is older than TTL has died: every replica's heartbeat also deletes such
// rows (their members go with them) and notifies their streams, and Read ignores their
// members meanwhile, so a dead replica's members are gone for everyone within TTL plus a
// heartbeat. A replica that finds its own row deleted (it could not renew it in time) writes
// it and its members again. Close deletes the row and its members at once.
//
// Each Store keeps one dedicated listening connection (internal/pglisten), named
// "ballet-gateway-presence" unless the pool's connection string sets application_name; after
// it reconnects, subscribers are told that any stream may have changed.
package pgpresence
