// Package pgstore is the tracker's Postgres Store (tables items, item_dependencies and
// project_counters of the 0002_tracker migration, with projects and project_members of 0001).
//
// Every write is one transaction that changes the tables and inserts its events last, with
// pglog.Insert (which takes the log's commit-order lock until commit). Item numbers come from
// the project's project_counters row, which also serializes dependency changes and deletions
// within a project so that the cycle check sees every concurrent change. The snapshot (Items)
// reads the items and the log head in one REPEATABLE READ transaction.
//
// The pool belongs to the caller.
package pgstore
