package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// runBurst is the burst mode: --subscribers N subscribe to the stream, the
// last --paused K of them stop reading their sockets, then ONE transaction
// inserts --burst-events events of --event-bytes each. The fast readers read
// as fast as loopback allows; the paused ones resume --pause after the
// commit (or once the fast ones have it all). Every subscriber resumes after
// a stream.closed or a lost connection with from_seq, and is checked for
// every event exactly once, in order. With --server-pid it samples the
// server's RSS every 10 ms and its CPU from the write's start to the last
// delivery.
func (b *bench) runBurst(ctx context.Context, r *report) error {
	cfg := b.cfg
	n, k := cfg.subscribers, cfg.paused
	base, err := head(ctx, b.pool)
	if err != nil {
		return err
	}
	commits := newCommitLog(base)
	subs := make([]*burstSub, n)
	trs := make([]*tracker, n)
	for i := range subs {
		trs[i] = newTracker(base)
		subs[i] = &burstSub{idx: i, paused: i >= n-k, tr: trs[i], closes: codeCounts{}, disconnects: codeCounts{}}
	}
	b.progress("connecting %d subscribers to %s (%s), %d of them to pause", n, cfg.url, codecLabel(cfg.codec), k)
	cr, err := b.connectAll(ctx, n, &connectSpec{subscribe: true, trackers: trs})
	if err != nil {
		return err
	}
	addConnect(r, cr, n)

	release := make(chan struct{})
	var releaseOnce sync.Once
	resume := func() { releaseOnce.Do(func() { close(release) }) }
	defer resume()
	for i, s := range subs {
		s.c, s.from = cr.clients[i], cr.subSeq[i]
		if s.paused {
			s.c.holdUntil(release)
		}
	}
	dctx, stopDrivers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop := func() {
		stopDrivers()
		wg.Wait()
	}
	defer stop()
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.drive(dctx, b)
		}()
	}

	var rss *rssSampler
	var rssBase, cpu0 int64
	if pid := cfg.serverPID; pid != 0 {
		if rssBase, err = procRSS(pid).rss(ctx); err != nil {
			return err
		}
		if cpu0, err = serverTicks(pid); err != nil {
			return fmt.Errorf("--server-pid %d: %w", pid, err)
		}
		rss = startRSS(ctx, pid)
		defer rss.stop()
	}

	b.progress("writing %d events of %d bytes in one transaction", cfg.burstEvents, cfg.payloadBytes)
	ws := newWriterSet(b.pool, cfg, commits)
	writeStart := nowNs()
	if err := ws.run(ctx, &writeSpec{batch: cfg.burstEvents, writers: 1, total: int64(cfg.burstEvents)}); err != nil {
		return err
	}
	commitNs := nowNs()
	b.progress("committed in %.2f s; waiting for the deliveries", float64(commitNs-writeStart)/1e9)
	w := b.awaitBurst(ctx, subs, commits.maxSeq.Load(), commitNs, resume)
	stop()
	if rss != nil {
		rss.stop()
	}

	acc := accountBurst(subs, commits)
	r.add("committed_events", acc.committed, "")
	r.add("write_s", float64(commitNs-writeStart)/1e9, "s")
	fast, slow := acc.groups[0], acc.groups[1]
	if fast.subscribers > 0 && fast.lastNs > commitNs {
		r.add("fast_last_delivery_s", float64(fast.lastNs-commitNs)/1e9, "s")
		r.add("deliveries_per_s", float64(fast.delivered)/(float64(fast.lastNs-commitNs)/1e9), "events/s")
	}
	if slow.subscribers > 0 && w.resumeNs != 0 {
		r.add("paused_resumed_after_s", float64(w.resumeNs-commitNs)/1e9, "s")
		if slow.lastNs > w.resumeNs {
			r.add("paused_caught_up_s", float64(slow.lastNs-w.resumeNs)/1e9, "s")
		}
	}
	if pid := cfg.serverPID; pid != 0 {
		r.add("server_cpu_ms", float64(w.cpuEnd-cpu0)*1000/clockTicks, "ms")
		if w.cpuFast != 0 && fast.subscribers > 0 {
			r.add("server_cpu_to_fast_done_ms", float64(w.cpuFast-cpu0)*1000/clockTicks, "ms")
		}
		if all := acc.received; all > 0 {
			r.add("server_cpu_us_per_delivery", float64(w.cpuEnd-cpu0)*1e6/clockTicks/float64(all), "us")
		}
		if rss.err != nil {
			return rss.err
		}
		r.add("server_rss_baseline_bytes", rssBase, "B")
		r.add("server_rss_peak_bytes", rss.peak, "B")
		r.add("server_rss_peak_growth_bytes", max(rss.peak-rssBase, 0), "B")
		r.add("server_rss_peak_after_commit_s", float64(rss.peakNs-commitNs)/1e9, "s")
		r.add("server_rss_samples", rss.samples, "")
	} else {
		r.add("server_cpu_rss", "not measured: give --server-pid", "")
	}
	r.add("delivered_events", acc.delivered, "")
	r.add("expected_deliveries", acc.committed*int64(n), "")
	fast.addTo(r, "fast")
	slow.addTo(r, "paused")
	acc.check(r)
	if n := b.badFrames.Load(); n > 0 {
		r.add("undecodable_frames", n, "")
		r.fail("%d frames could not be decoded", n)
	}
	return nil
}

// burstWait is what awaitBurst saw.
type burstWait struct {
	resumeNs int64 // when the paused readers were let go (0: none paused)
	cpuFast  int64 // server CPU ticks when the fast readers had it all (0: never, or not measured)
	cpuEnd   int64 // server CPU ticks at the end of the wait
}

// awaitBurst waits until every subscriber has received seq target (through
// any resubscriptions), or until none has made progress for --grace since
// the paused readers were let go. It lets them go --pause after commitNs,
// or, with no --pause, once the fast readers have it all or stopped.
func (b *bench) awaitBurst(ctx context.Context, subs []*burstSub, target, commitNs int64, resume func()) burstWait {
	cfg := b.cfg
	var w burstWait
	ticks := func() int64 {
		if cfg.serverPID == 0 {
			return 0
		}
		t, err := serverTicks(cfg.serverPID)
		if err != nil {
			b.noteError(fmt.Errorf("--server-pid %d: %w", cfg.serverPID, err))
		}
		return t
	}
	resumed := cfg.paused == 0
	start := time.Now()
	lastProgress := start
	var lastSum int64
	fastDone := false
	for {
		now := time.Now()
		var sum int64
		fastBehind, behind := 0, 0
		for _, s := range subs {
			l := s.tr.last.Load()
			sum += l
			if l < target {
				behind++
				if !s.paused {
					fastBehind++
				}
			}
		}
		if sum != lastSum {
			lastSum, lastProgress = sum, now
		}
		if fastBehind == 0 && !fastDone {
			fastDone = true
			w.cpuFast = ticks()
		}
		stalled := now.Sub(lastProgress) > cfg.grace
		if !resumed && ((cfg.pause > 0 && nowNs() >= commitNs+int64(cfg.pause)) ||
			(cfg.pause == 0 && (fastDone || stalled))) {
			resumed = true
			resume()
			w.resumeNs = nowNs()
			b.progress("the %d paused readers read again", cfg.paused)
			lastProgress, stalled = now, false
		}
		if behind == 0 || (resumed && stalled) || now.Sub(start) > maxCatchUp || ctx.Err() != nil {
			w.cpuEnd = ticks()
			return w
		}
		_ = sleepUntil(ctx, now.Add(10*time.Millisecond))
	}
}
