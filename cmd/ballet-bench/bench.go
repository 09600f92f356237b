package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// runOptions are what run needs beyond the command line.
type runOptions struct {
	Getenv         func(string) string
	Stdout, Stderr io.Writer
	// DropEvent, when set, sees every tracked event (connection index,
	// seq); returning true drops it as if it had been lost, which proves
	// that the checks catch a loss.
	DropEvent func(conn int, seq int64) bool
	// ModelListener, when set, is where the planner mode serves the model instead of
	// --model-listen (tests start the gateway pointed at it first).
	ModelListener net.Listener
	// DropDelta, when set, sees every stamped delta a watcher reads (watcher index, delta
	// number); returning true drops it, which proves that the checks catch a loss.
	DropDelta func(watcher, n int) bool
	// Held, when set, is called once idle mode's connections are all subscribed (tests write
	// the events of --fanout-events there).
	Held func()
}

// bench is the state of one run.
type bench struct {
	cfg   *config
	opts  *runOptions
	token string
	http  *http.Client
	pool  *pgxpool.Pool // nil in idle mode
	start time.Time

	// latCommits is the commit log latencies are measured against; nil
	// when the mode measures no per-event latency.
	latCommits *commitLog
	lat        histogram // commit → client, per delivered event

	// watches are the planner mode's watchers; nil in the other modes.
	watches *watchSet

	pendingDropped atomic.Int64 // early events whose latency could not be kept
	badFrames      atomic.Int64
	disconnects    atomic.Int64
	laggingCloses  atomic.Int64
	serverCloses   atomic.Int64 // stream.closed other than lagging
	fanoutDone     atomic.Int64 // connections that have --fanout-events events

	errMu    sync.Mutex
	errCount int
}

// noteError reports a problem on stderr (the first few of them).
func (b *bench) noteError(err error) {
	b.errMu.Lock()
	defer b.errMu.Unlock()
	b.errCount++
	if b.errCount <= 5 {
		fmt.Fprintf(b.opts.Stderr, "ballet-bench: %v\n", err)
	} else if b.errCount == 6 {
		fmt.Fprintf(b.opts.Stderr, "ballet-bench: more errors follow; not shown\n")
	}
}

// progress prints a progress line on stderr.
func (b *bench) progress(format string, a ...any) {
	b.errMu.Lock()
	defer b.errMu.Unlock()
	fmt.Fprintf(b.opts.Stderr, "ballet-bench: [%5.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, a...))
}

// connectSpec says how connectAll opens its connections.
type connectSpec struct {
	// subscribe subscribes each connection (id "s") after auth; trackers
	// and fromSeq (either may be nil) give each one's tracker and from_seq.
	subscribe bool
	trackers  []*tracker
	fromSeq   []*int64
	// all opens every connection at once (a reconnect storm); otherwise at
	// most connectConcurrency at a time, paced by --connect-rate.
	all bool
	// ready, when set, is called in each connection's goroutine once it
	// has subscribed (storms wait there for their catch-up).
	ready func(i int, c *client)
}

// connectConcurrency bounds handshakes in flight.
const connectConcurrency = 128

// connectResult is what connectAll measured.
type connectResult struct {
	clients []*client
	subSeq  []int64       // stream.subscribe's seq per connection
	elapsed time.Duration // first dial to last subscribe
	lat     *histogram    // dial → subscribed, per connection
	failed  int
}

// connectAll opens n authenticated (and subscribed) connections. On the
// first failure it stops, closes what it opened and returns the error
// with the partial result.
func (b *bench) connectAll(ctx context.Context, n int, spec *connectSpec) (*connectResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res := &connectResult{clients: make([]*client, n), subSeq: make([]int64, n), lat: &histogram{}}
	conc := connectConcurrency
	if spec.all {
		conc = n
	}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	var failed atomic.Int64
	var release chan struct{}
	if spec.all {
		release = make(chan struct{})
	}
	start := time.Now()
	var firstErr error
	var errOnce sync.Once
launch:
	for i := range n {
		if r := b.cfg.connectRate; r > 0 && !spec.all {
			if err := sleepUntil(ctx, start.Add(time.Duration(float64(i)/r*float64(time.Second)))); err != nil {
				break
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break launch
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if release != nil {
				<-release
			}
			t0 := nowNs()
			c, seq, err := b.connectOne(ctx, i, spec)
			if err != nil {
				failed.Add(1)
				errOnce.Do(func() { firstErr = err })
				cancel(err)
				return
			}
			res.lat.record(nowNs() - t0)
			res.clients[i], res.subSeq[i] = c, seq
			if spec.ready != nil {
				spec.ready(i, c)
			}
		}()
	}
	if release != nil {
		start = time.Now()
		close(release)
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.failed = int(failed.Load())
	if firstErr == nil && ctx.Err() != nil {
		firstErr = context.Cause(ctx)
	}
	if firstErr != nil {
		closeAll(res.clients)
		return res, firstErr
	}
	return res, nil
}

// connectOne dials, authenticates and subscribes connection i.
func (b *bench) connectOne(ctx context.Context, i int, spec *connectSpec) (*client, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	subID := ""
	var tr *tracker
	var from *int64
	if spec.subscribe {
		subID = "s"
		if spec.trackers != nil {
			tr = spec.trackers[i]
		} else {
			tr = newTracker(1<<62 - 1) // tracks nothing
		}
		if spec.fromSeq != nil {
			from = spec.fromSeq[i]
		}
	}
	if b.cfg.transport == transportHTTP {
		// The request is the subscription: there is no connection without one.
		c, seq, err := b.dialHTTP(ctx, i, subID, tr, from)
		if err != nil {
			return nil, 0, fmt.Errorf("connection %d: %w", i, err)
		}
		return c, seq, nil
	}
	c, err := b.dial(ctx, i)
	if err != nil {
		return nil, 0, err
	}
	seq, err := c.authSubscribe(ctx, b.token, subID, tr, from)
	if err != nil {
		c.close()
		return nil, 0, fmt.Errorf("connection %d: %w", i, err)
	}
	return c, seq, nil
}

// closeAll closes the given connections (nil entries are skipped) in
// parallel and waits for their readers.
func closeAll(cs []*client) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for _, c := range cs {
		if c == nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.close()
			<-sem
		}()
	}
	wg.Wait()
}

// sleepUntil waits until t or the end of ctx.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitCaughtUp waits until every tracker that is still live has received
// seq. It gives up once no tracker has made progress for grace (or after
// maxCatchUp in all); it returns how many had not caught up.
func waitCaughtUp(ctx context.Context, trs []*tracker, seq int64, grace time.Duration) int {
	start := time.Now()
	lastProgress := start
	var lastSum int64
	for {
		behind := 0
		var sum int64
		for _, tr := range trs {
			l := tr.last.Load()
			sum += l
			if !tr.ended.Load() && l < seq {
				behind++
			}
		}
		now := time.Now()
		if sum != lastSum {
			lastSum, lastProgress = sum, now
		}
		if behind == 0 || now.Sub(lastProgress) > grace || now.Sub(start) > maxCatchUp || ctx.Err() != nil {
			return behind
		}
		_ = sleepUntil(ctx, now.Add(10*time.Millisecond))
	}
}

// maxCatchUp bounds the wait for the last deliveries.
const maxCatchUp = 5 * time.Minute

// deliveries sums up what the trackers saw against the commit log. Call it
// once no reader touches the trackers any more.
type deliveries struct {
	committed      int64 // events the writers committed
	subscriptions  int   // trackers counted (not closed by the server)
	delivered      int64 // committed events received, once each
	expected       int64 // committed × subscriptions
	gaps           int64
	dups           int64
	outOfOrder     int64
	foreign        int64 // events of the stream not written by this run
	lagged         int   // subscriptions closed lagging
	missedByLagged int64
	closedOther    int   // subscriptions closed for another reason or lost
	early          int64 // events read before their COMMIT had returned
	firstNs        int64 // earliest receive time
	lastNs         int64 // latest receive time
}

func summarize(trs []*tracker, commits *commitLog, lat *histogram) *deliveries {
	bm := commits.bitmap()
	d := &deliveries{committed: commits.count.Load()}
	for _, tr := range trs {
		d.early += tr.resolve(commits, lat)
		got := tr.delivered(bm)
		d.dups += tr.dups
		d.outOfOrder += tr.outOfOrder
		d.foreign += tr.received - tr.dups - got
		if tr.firstNs != 0 && (d.firstNs == 0 || tr.firstNs < d.firstNs) {
			d.firstNs = tr.firstNs
		}
		d.lastNs = max(d.lastNs, tr.lastNs)
		switch {
		case tr.lagged:
			d.lagged++
			d.missedByLagged += tr.gaps(bm)
			d.delivered += got
			continue
		case tr.ended.Load():
			d.closedOther++
		}
		d.subscriptions++
		d.delivered += got
		d.gaps += tr.gaps(bm)
	}
	d.expected = d.committed * int64(d.subscriptions)
	return d
}

// addTo puts the delivery figures and checks into the report.
func (d *deliveries) addTo(r *report) {
	r.add("committed_events", d.committed, "")
	r.add("delivered_events", d.delivered, "")
	r.add("expected_deliveries", d.expected, "")
	r.add("gaps", d.gaps, "")
	r.add("duplicates", d.dups, "")
	r.add("out_of_order", d.outOfOrder, "")
	r.add("lagging_closes", d.lagged, "")
	if d.lagged > 0 {
		r.add("missed_by_lagging", d.missedByLagged, "")
	}
	if d.foreign > 0 {
		r.add("other_events_of_stream", d.foreign, "")
	}
	if d.gaps > 0 {
		r.fail("%d gaps: committed events never received", d.gaps)
	}
	if d.dups > 0 {
		r.fail("%d duplicates", d.dups)
	}
	if d.outOfOrder > 0 {
		r.fail("%d events out of order", d.outOfOrder)
	}
	if d.closedOther > 0 {
		r.fail("%d subscriptions ended by the server or lost their connection", d.closedOther)
	}
	if d.committed == 0 {
		r.fail("no event was committed")
	}
}

// addLatency puts the commit → client latency into the report.
func (b *bench) addLatency(r *report, early int64) {
	addLatencies(r, &b.lat)
	if early > 0 {
		r.add("events_before_commit_returned", early, "")
	}
	if n := b.pendingDropped.Load(); n > 0 {
		r.add("latency_samples_dropped", n, "")
	}
	r.add("latency_method", "receive time minus the writer's COMMIT return time, one process clock", "")
}

// addLatencies puts the samples and percentiles of h into the report.
func addLatencies(r *report, h *histogram) {
	r.add("latency_samples", h.count.Load(), "")
	r.add("latency_p50_ms", h.quantile(0.50), "ms")
	r.add("latency_p90_ms", h.quantile(0.90), "ms")
	r.add("latency_p99_ms", h.quantile(0.99), "ms")
	r.add("latency_p999_ms", h.quantile(0.999), "ms")
	r.add("latency_max_ms", h.maxMs(), "ms")
	r.add("latency_mean_ms", h.mean(), "ms")
}

// addConnect puts the connection phase into the report.
func addConnect(r *report, cr *connectResult, n int) {
	r.add("connections", n-cr.failed, "")
	r.add("connect_s", cr.elapsed.Seconds(), "s")
	if cr.elapsed > 0 {
		r.add("connect_rate", float64(n-cr.failed)/cr.elapsed.Seconds(), "conn/s")
	}
	r.add("connect_p50_ms", cr.lat.quantile(0.5), "ms")
	r.add("connect_p99_ms", cr.lat.quantile(0.99), "ms")
}

// addConnHealth reports connection-level trouble seen during the run.
func (b *bench) addConnHealth(r *report) {
	if n := b.disconnects.Load(); n > 0 {
		r.add("connections_lost", n, "")
		r.fail("%d connections lost during the run", n)
	}
	if n := b.badFrames.Load(); n > 0 {
		r.add("undecodable_frames", n, "")
		r.fail("%d frames could not be decoded", n)
	}
}
