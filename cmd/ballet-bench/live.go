package main

import (
	"context"
	"fmt"
	"time"
)

// runLive is the live and saturate modes: N subscribers, the writer at
// --rate (live) or as fast as it can (saturate) for --duration, then a
// grace period for the last deliveries.
func (b *bench) runLive(ctx context.Context, r *report) error {
	cfg := b.cfg
	base, err := head(ctx, b.pool)
	if err != nil {
		return err
	}
	commits := newCommitLog(base)
	b.latCommits = commits
	trs := make([]*tracker, cfg.subscribers)
	for i := range trs {
		trs[i] = newTracker(base)
	}
	b.progress("connecting %d subscribers to %s (%s)", cfg.subscribers, cfg.url, codecLabel(cfg.codec))
	cr, err := b.connectAll(ctx, cfg.subscribers, &connectSpec{subscribe: true, trackers: trs})
	if err != nil {
		return err
	}
	defer closeAll(cr.clients)
	addConnect(r, cr, cfg.subscribers)

	var costBefore dbCost
	if cfg.dbCost {
		// Counts kept by idle sessions (the gateways') reach pg_stat_database within statsFlush.
		b.progress("waiting %s for the database's statistics to settle", statsFlush)
		if err := sleepUntil(ctx, time.Now().Add(statsFlush)); err != nil {
			return err
		}
		if costBefore, err = readDBCost(ctx, b.pool, cfg.dbPID); err != nil {
			return err
		}
	}
	ws := newWriterSet(b.pool, cfg, commits)
	spec := &writeSpec{batch: cfg.batch, writers: cfg.writers, until: time.Now().Add(cfg.duration)}
	if cfg.mode == modeLive {
		spec.rate = cfg.rate
		b.progress("writing %g events/s in batches of %d for %s", cfg.rate, cfg.batch, cfg.duration)
	} else {
		spec.gate = windowGate(trs, commits, int64(cfg.window))
		b.progress("writing as fast as the subscribers take it (window %d events), batches of %d, for %s",
			cfg.window, cfg.batch, cfg.duration)
	}
	writeStart := nowNs()
	werr := ws.run(ctx, spec)
	writeEnd := nowNs()
	behind := waitCaughtUp(ctx, trs, commits.maxSeq.Load(), cfg.grace)
	closeAll(cr.clients)
	if werr != nil {
		return werr
	}
	if cfg.dbCost {
		// CPU up to now (the deliveries are done); transactions once the sessions flushed them.
		cpu, err := readDBCost(ctx, b.pool, cfg.dbPID)
		if err != nil {
			return err
		}
		b.progress("waiting %s for the database's statistics", statsFlush)
		if err := sleepUntil(ctx, time.Now().Add(statsFlush)); err != nil {
			return err
		}
		after, err := readDBCost(ctx, b.pool, 0)
		if err != nil {
			return err
		}
		after.ticks = cpu.ticks
		addDBCost(r, costBefore, after, ws.txs.Load(), cfg.dbPID)
	}

	d := summarize(trs, commits, &b.lat)
	writeS := float64(writeEnd-writeStart) / 1e9
	r.add("write_s", writeS, "s")
	r.add("written_events_per_s", float64(d.committed)/writeS, "events/s")
	r.add("transactions", ws.txs.Load(), "")
	r.add("commit_p50_ms", ws.txLat.quantile(0.5), "ms")
	r.add("commit_p99_ms", ws.txLat.quantile(0.99), "ms")
	if n := ws.behind.Load(); n > 0 && cfg.mode == modeLive {
		r.add("transactions_behind_schedule", n, "")
	}
	d.addTo(r)
	if d.lastNs > writeStart {
		r.add("deliveries_per_s", float64(d.delivered)/(float64(d.lastNs-writeStart)/1e9), "events/s")
	}
	b.addLatency(r, d.early)
	if behind > 0 {
		r.add("subscribers_not_caught_up", behind, "")
	}
	b.addConnHealth(r)
	if d.lagged > 0 {
		// Reported apart from gaps: the server said it dropped them.
		r.fail("%d subscriptions closed lagging", d.lagged)
	}
	return nil
}

// windowGate holds the writer back while the slowest live subscriber is
// more than window seqs behind the newest commit, so that saturation
// measures what the gateway sustains instead of a backlog that grows
// without bound.
func windowGate(trs []*tracker, commits *commitLog, window int64) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for {
			newest := commits.maxSeq.Load()
			slowest := newest
			for _, tr := range trs {
				if !tr.ended.Load() {
					slowest = min(slowest, tr.last.Load())
				}
			}
			if newest-slowest <= window {
				return nil
			}
			if err := sleepUntil(ctx, time.Now().Add(time.Millisecond)); err != nil {
				return err
			}
		}
	}
}

// checkFileLimit fails early when n connections cannot fit.
func checkFileLimit(n int) error {
	limit, err := raiseFileLimit()
	if err != nil {
		return fmt.Errorf("raise the open-file limit: %w", err)
	}
	if limit != 0 && uint64(n)+64 > limit {
		return fmt.Errorf("%d connections need more open files than the limit of %d (raise ulimit -n)", n, limit)
	}
	return nil
}
