// Package migrations holds the gateway's database schema as embedded SQL files and applies
// them.
//
// Apply brings a database up to date; it is idempotent and safe to run from several processes
// at once (a session advisory lock serializes runs, and schema_migrations records each applied
// version). Check tells a server whether the schema is current without changing anything.
//
// Migration files are named NNNN_name.sql and applied in name order, each in its own
// transaction. Never edit an applied file: add a new one.
package migrations
