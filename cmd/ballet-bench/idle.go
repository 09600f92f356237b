package main

import (
	"context"
	"time"
)

// runIdle opens N authenticated connections with one subscription each,
// lets the server settle, and reports the server's RSS growth per
// connection; the connections then stay open for --duration.
func (b *bench) runIdle(ctx context.Context, r *report) error {
	cfg := b.cfg
	var src rssReader
	switch {
	case cfg.serverPID != 0:
		src = procRSS(cfg.serverPID)
	case cfg.serverMetrics != "":
		src = metricsRSS(cfg.serverMetrics)
	}
	var before int64
	if src != nil {
		var err error
		if before, err = src.rss(ctx); err != nil {
			return err
		}
	}
	clientBefore := selfRSS()
	b.progress("opening %d idle subscribed connections to %s (%s)", cfg.subscribers, cfg.url, codecLabel(cfg.codec))
	cr, err := b.connectAll(ctx, cfg.subscribers, &connectSpec{subscribe: true})
	if err != nil {
		return err
	}
	defer closeAll(cr.clients)
	addConnect(r, cr, cfg.subscribers)
	held := time.Now()
	if b.opts.Held != nil {
		b.opts.Held()
	}

	if err := sleepUntil(ctx, held.Add(cfg.settle)); err != nil {
		return err
	}
	if src != nil {
		after, err := src.rss(ctx)
		if err != nil {
			return err
		}
		r.add("server_rss_before_bytes", before, "B")
		r.add("server_rss_after_bytes", after, "B")
		r.add("server_rss_per_conn_bytes", float64(after-before)/float64(cfg.subscribers), "B")
	} else {
		r.add("server_rss", "not measured: give --server-pid or --server-metrics", "")
	}
	if c := selfRSS(); c > 0 && clientBefore > 0 {
		r.add("client_rss_per_conn_bytes", float64(c-clientBefore)/float64(cfg.subscribers), "B")
	}

	b.progress("holding the connections for %s", cfg.duration)
	if err := sleepUntil(ctx, held.Add(max(cfg.duration, cfg.settle))); err != nil {
		return err
	}
	if src != nil {
		if end, err := src.rss(ctx); err == nil {
			r.add("server_rss_end_bytes", end, "B")
		}
	}
	r.add("held_s", time.Since(held).Seconds(), "s")
	if cfg.fanoutEvents > 0 {
		b.waitFanout(ctx, r, cr.clients)
	}
	closeAll(cr.clients)
	b.addConnHealth(r)
	if n := b.laggingCloses.Load() + b.serverCloses.Load(); n > 0 {
		r.add("subscriptions_closed", n, "")
		r.fail("%d subscriptions were closed by the server", n)
	}
	return nil
}
