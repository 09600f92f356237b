package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/gateway/protocol"
)

// runReplay writes --replay-events events, then has one client subscribe
// with from_seq just before them --repeat times, timing each from the
// subscribe request to the last replayed event. The first replay is also
// reported alone: it is the one that finds no body encoded yet (nobody was
// subscribed when the events were written). A request refused with -32029
// (the connection's request rate) is sent again after its retry_after_ms, as
// the Realtime API asks of a client, and timed from then.
func (b *bench) runReplay(ctx context.Context, r *report) error {
	cfg := b.cfg
	base, err := head(ctx, b.pool)
	if err != nil {
		return err
	}
	commits := newCommitLog(base)
	b.progress("writing %d events to replay", cfg.replayEvents)
	ws := newWriterSet(b.pool, cfg, commits)
	if err := ws.run(ctx, &writeSpec{batch: cfg.batch, writers: 1, total: int64(cfg.replayEvents)}); err != nil {
		return err
	}
	last := commits.maxSeq.Load()
	bm := commits.bitmap()

	cr, err := b.connectAll(ctx, 1, &connectSpec{})
	if err != nil {
		return err
	}
	defer closeAll(cr.clients)
	c := cr.clients[0]
	var times histogram
	var gaps, dups, ooo, foreign int64
	var first float64
	b.progress("replaying %d events %d times (from_seq %d)", cfg.replayEvents, cfg.repeat, base)
	for k := range cfg.repeat {
		tr := newTracker(base)
		reached := tr.watch(last)
		subID := fmt.Sprintf("r%d", k)
		from := base
		var t0 int64
		err := c.retryLimited(ctx, func() error {
			t0 = nowNs()
			_, err := c.subscribe(ctx, subID, tr, &from)
			return err
		})
		if err != nil {
			var re *rpcError
			if errors.As(err, &re) && re.e.Code == int(protocol.ErrResyncRequired) {
				return fmt.Errorf("%w (the stream has more events after seq %d than the server's replay limit)", err, base)
			}
			return err
		}
		tm := time.NewTimer(cfg.grace + 10*time.Second)
		select {
		case <-reached:
			d := nowNs() - t0
			times.record(d)
			if k == 0 {
				first = float64(d) / 1e6
			}
		case <-tm.C:
		case <-ctx.Done():
		}
		tm.Stop()
		if err := ctx.Err(); err != nil {
			return err
		}
		uerr := c.retryLimited(ctx, func() error { return c.unsubscribe(ctx, subID) })
		if tr.ended.Load() {
			r.fail("replay %d: subscription closed (%s)", k, closeReason(tr))
			break
		}
		if uerr != nil {
			return uerr
		}
		g := tr.gaps(bm)
		gaps += g
		dups += tr.dups
		ooo += tr.outOfOrder
		foreign += tr.received - tr.dups - tr.delivered(bm)
	}
	closeAll(cr.clients)
	r.add("replayed_events", commits.count.Load(), "")
	r.add("from_seq", base, "")
	r.add("replays_completed", times.count.Load(), "")
	r.add("replay_p50_ms", times.quantile(0.5), "ms")
	r.add("replay_p90_ms", times.quantile(0.9), "ms")
	r.add("replay_p99_ms", times.quantile(0.99), "ms")
	r.add("replay_max_ms", times.maxMs(), "ms")
	r.add("replay_first_ms", first, "ms")
	if m := times.mean(); m > 0 {
		r.add("replay_events_per_s", float64(commits.count.Load())/(m/1000), "events/s")
	}
	r.add("gaps", gaps, "")
	r.add("duplicates", dups, "")
	r.add("out_of_order", ooo, "")
	if foreign > 0 {
		r.add("other_events_of_stream", foreign, "")
	}
	if n := int64(cfg.repeat) - times.count.Load(); n > 0 {
		r.fail("%d replays did not reach seq %d in time", n, last)
	}
	if gaps > 0 {
		r.fail("%d gaps: committed events never replayed", gaps)
	}
	if dups > 0 {
		r.fail("%d duplicates", dups)
	}
	if ooo > 0 {
		r.fail("%d events out of order", ooo)
	}
	b.addConnHealth(r)
	return nil
}

func closeReason(tr *tracker) string {
	switch {
	case tr.lagged:
		return "lagging"
	case tr.closed != "":
		return tr.closed
	}
	return "connection lost"
}

// retryLimited calls call until it is not refused with -32029, waiting each
// refusal's retry_after_ms (at least 1 ms, at most 1 s) between attempts.
func (c *client) retryLimited(ctx context.Context, call func() error) error {
	for {
		err := call()
		var re *rpcError
		if !errors.As(err, &re) || re.e.Code != int(protocol.ErrLimitExceeded) {
			return err
		}
		var data struct {
			RetryAfterMs int64 `json:"retry_after_ms" msgpack:"retry_after_ms"`
		}
		if re.e.Data == nil || c.codec.Unmarshal(re.e.Data, &data) != nil {
			return err
		}
		wait := time.Duration(min(max(data.RetryAfterMs, 1), 1000)) * time.Millisecond
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
