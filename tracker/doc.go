// Package tracker is the issue tracker's model and REST surface: projects, members, items and
// the dependencies between items. Every write appends its events to the event log in the same
// transaction as the change, so change streams carry exactly what was stored.
//
// Entry points: Service (permission checks over a Store, the API shared by REST and the
// planner's tools) and NewHandler (the /api/v1/ REST handler). Stores live in pgstore
// (Postgres) and memstore (memory, for development); trackertest is the suite both pass.
//
// Event payloads: item.created carries the item as REST shows it; item.updated carries the
// changed fields as {"title": {"from", "to"}, "description": {...}} plus "version";
// item.state_changed {from, to, version}; item.deleted {key, id, version};
// dependency.added and dependency.removed {blocker, blocked, version}, on the blocked item.
// "version" is the item's version after the change; an event's occurred_at equals the item's
// new updated_at. Adding or removing a dependency is a change of the blocked item (its
// blocked_by), so it increments that item's version.
//
// Permissions: reads need tracker.read on the project, writes tracker.write, member changes
// tracker.manage. Admin subjects (Options.AdminSubjects) create projects, see every project
// and manage members everywhere; item access always follows the project role, as on /rpc.
package tracker
