package main

import (
	"context"
	"time"
)

// runWriter is the writer mode: --writers concurrent batched writers at
// full speed for --duration, then the run's events are read back in seq
// order to check that each writer's events appear in the order it
// committed them.
func (b *bench) runWriter(ctx context.Context, r *report) error {
	cfg := b.cfg
	base, err := head(ctx, b.pool)
	if err != nil {
		return err
	}
	commits := newCommitLog(base)
	ws := newWriterSet(b.pool, cfg, commits)
	b.progress("%d writers, batches of %d, for %s", cfg.writers, cfg.batch, cfg.duration)
	start := nowNs()
	if err := ws.run(ctx, &writeSpec{batch: cfg.batch, writers: cfg.writers, until: time.Now().Add(cfg.duration)}); err != nil {
		return err
	}
	secs := float64(nowNs()-start) / 1e9
	oc, err := ws.verifyOrder(ctx, base)
	if err != nil {
		return err
	}
	r.add("committed_events", commits.count.Load(), "")
	r.add("transactions", ws.txs.Load(), "")
	r.add("events_per_s", float64(commits.count.Load())/secs, "events/s")
	r.add("transactions_per_s", float64(ws.txs.Load())/secs, "tx/s")
	r.add("commit_p50_ms", ws.txLat.quantile(0.5), "ms")
	r.add("commit_p99_ms", ws.txLat.quantile(0.99), "ms")
	r.add("commit_max_ms", ws.txLat.maxMs(), "ms")
	r.add("read_back_rows", oc.rows, "")
	r.add("commit_order_violations", oc.violations, "")
	r.add("missing_events", oc.missing, "")
	if oc.violations > 0 {
		r.fail("%d events out of their writer's commit order", oc.violations)
	}
	if oc.missing > 0 {
		r.fail("%d committed events not found in the log", oc.missing)
	}
	if oc.unexpected > 0 {
		r.add("unconfirmed_events", oc.unexpected, "")
	}
	if commits.count.Load() == 0 {
		r.fail("no event was committed")
	}
	return nil
}
