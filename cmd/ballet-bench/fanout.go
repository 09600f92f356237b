package main

import (
	"context"
	"sync/atomic"
	"time"
)

// fanoutState is what one idle connection received of the events written by
// someone else during the run (--fanout-events): written by its reader only.
type fanoutState struct {
	events atomic.Int64
	doneNs atomic.Int64 // wall clock (Unix ns) when the --fanout-events-th event arrived
}

// fanoutEvent counts one event of the tracked subscription.
func (c *client) fanoutEvent() {
	if c.fanout.events.Add(1) == int64(c.b.cfg.fanoutEvents) {
		c.fanout.doneNs.Store(time.Now().UnixNano())
		c.b.fanoutDone.Add(1)
	}
}

// waitFanout waits up to --grace until every connection has received
// --fanout-events events, then reports when the first and the last had them
// (Unix ms, the machine's wall clock, to compare with the writer's commit in
// another process) and the connections that missed some.
func (b *bench) waitFanout(ctx context.Context, r *report, cs []*client) {
	n := int64(b.cfg.fanoutEvents)
	b.progress("waiting up to %s for %d events of %s on every connection", b.cfg.grace, n, b.cfg.streamName)
	deadline := time.Now().Add(b.cfg.grace)
	for b.fanoutDone.Load() < int64(len(cs)) && time.Now().Before(deadline) {
		if sleepUntil(ctx, time.Now().Add(5*time.Millisecond)) != nil {
			break
		}
	}
	var complete, extra, missed int
	var first, last int64
	for _, c := range cs {
		got := c.fanout.events.Load()
		switch {
		case got < n:
			missed++
			continue
		case got > n:
			extra++
		}
		complete++
		t := c.fanout.doneNs.Load()
		if first == 0 || t < first {
			first = t
		}
		last = max(last, t)
	}
	r.add("fanout_events", n, "")
	r.add("fanout_complete", complete, "")
	r.add("fanout_missed", missed, "")
	if extra > 0 {
		r.add("fanout_more_events", extra, "")
	}
	if complete > 0 {
		r.add("fanout_first_unix_ms", float64(first)/1e6, "ms")
		r.add("fanout_last_unix_ms", float64(last)/1e6, "ms")
		r.add("fanout_spread_ms", float64(last-first)/1e6, "ms")
	}
	if missed > 0 {
		r.fail("%d of %d connections did not receive %d events within %s", missed, len(cs), n, b.cfg.grace)
	}
}
