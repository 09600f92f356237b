// Package tailmetrics holds the metrics of the log's tailer: the highest event seq dispatched,
// the events read and dispatched, the time from an event's occurred_at to its dispatch, and the
// standby lag bound (BALLET_TAIL_MAX_LAG) that /readyz and the alerts compare the lag with.
//
// Entry point: New; the composition root registers its Collectors on the replica's registry
// and feeds it from the tailer's and the hub's callbacks (Dispatched, Delivered).
package tailmetrics
