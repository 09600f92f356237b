package main

import (
	"context"
	"sync"
	"time"
)

// runStorm is the replay-storm mode: N subscribers disconnect, the writer
// adds --storm-events events, and all N reconnect at once with from_seq
// = the last seq each had; it measures the time until every one has
// caught up, and checks the replayed events for gaps and duplicates.
func (b *bench) runStorm(ctx context.Context, r *report) error {
	cfg := b.cfg
	n := cfg.subscribers
	base, err := head(ctx, b.pool)
	if err != nil {
		return err
	}
	commits := newCommitLog(base)
	trs := make([]*tracker, n)
	for i := range trs {
		trs[i] = newTracker(base)
	}
	b.progress("connecting %d subscribers to %s (%s)", n, cfg.url, codecLabel(cfg.codec))
	cr, err := b.connectAll(ctx, n, &connectSpec{subscribe: true, trackers: trs})
	if err != nil {
		return err
	}
	addConnect(r, cr, n)
	b.progress("disconnecting all %d", n)
	closeAll(cr.clients)
	from := make([]*int64, n)
	for i, tr := range trs {
		f := max(cr.subSeq[i], tr.last.Load())
		from[i] = &f
	}

	b.progress("writing %d events while they are away", cfg.stormEvents)
	ws := newWriterSet(b.pool, cfg, commits)
	if err := ws.run(ctx, &writeSpec{batch: cfg.batch, writers: cfg.writers, total: int64(cfg.stormEvents)}); err != nil {
		return err
	}
	target := commits.maxSeq.Load()
	reached := make([]<-chan struct{}, n)
	for i, tr := range trs {
		reached[i] = tr.watch(target)
	}

	b.progress("reconnecting all %d at once", n)
	var catchUp histogram
	var mu sync.Mutex
	var lastDone time.Time
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second+cfg.grace)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	scr, err := b.connectAll(ctx, n, &connectSpec{
		subscribe: true, trackers: trs, fromSeq: from, all: true,
		ready: func(i int, c *client) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-reached[i]:
				case <-c.done:
				case <-wctx.Done():
				}
				select {
				case <-reached[i]:
				default:
					return // lost or too slow: counted as not caught up
				}
				now := time.Now()
				catchUp.record(int64(now.Sub(start)))
				mu.Lock()
				if now.After(lastDone) {
					lastDone = now
				}
				mu.Unlock()
			}()
		},
	})
	if err != nil {
		cancel() // the waiters of the connections that did come up
	}
	wg.Wait()
	if scr != nil {
		closeAll(scr.clients)
	}
	if err != nil {
		return err
	}
	r.add("storm_events", commits.count.Load(), "")
	r.add("reconnect_s", scr.elapsed.Seconds(), "s")
	r.add("reconnect_p99_ms", scr.lat.quantile(0.99), "ms")
	caught := catchUp.count.Load()
	r.add("caught_up", caught, "")
	if caught == int64(n) {
		r.add("all_caught_up_s", lastDone.Sub(start).Seconds(), "s")
		r.add("replayed_deliveries_per_s", float64(commits.count.Load())*float64(n)/lastDone.Sub(start).Seconds(), "events/s")
	} else {
		r.fail("%d of %d clients did not catch up in time", int64(n)-caught, n)
	}
	r.add("catch_up_p50_ms", catchUp.quantile(0.5), "ms")
	r.add("catch_up_p99_ms", catchUp.quantile(0.99), "ms")
	d := summarize(trs, commits, &histogram{})
	d.addTo(r)
	b.addConnHealth(r)
	if d.lagged > 0 {
		r.fail("%d subscriptions closed lagging", d.lagged)
	}
	return nil
}
