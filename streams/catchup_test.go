package streams

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/leaktest"
)

// catchUpEnv is a hub whose window holds 16 events, and the log its events are committed to.
type catchUpEnv struct {
	h   *Hub
	ll  *lockedLog
	log Log
	seq int64
}

func newCatchUpEnv(t *testing.T, counted bool, opts HubOptions) *catchUpEnv {
	opts.RecentBytes = cmpOr(opts.RecentBytes, 4<<20)
	h := NewHub(&opts)
	t.Cleanup(h.Close)
	h.win.events = 16
	e := &catchUpEnv{h: h, ll: &lockedLog{}}
	e.log = e.ll
	if counted {
		e.log = countingLog{e.ll}
	}
	return e
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// commit appends n events of project:P, of about size bytes each, and dispatches them.
func (e *catchUpEnv) commit(n, size int) []int64 {
	evs := make([]Event, n)
	seqs := make([]int64, n)
	for i := range evs {
		e.seq++
		evs[i] = testEvent(e.seq, "item.updated", "", fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", size)))
		seqs[i] = e.seq
	}
	e.ll.append(evs)
	e.h.Dispatch(evs)
	return seqs
}

func (e *catchUpEnv) subscribe(t *testing.T, id string, out Sender, cl *closings, catchUp func(int) time.Duration) *Subscription {
	t.Helper()
	sub, _, err := e.h.Subscribe(context.Background(), e.log, SubscribeRequest{ID: id, Subject: "alice",
		Stream: Stream{Kind: StreamProject, Key: "P"}, Codec: codec.JSON, Out: out, ReplayLimit: 10,
		OnClosed: cl.record, CatchUp: catchUp})
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A subscription that fell more than its ReplayLimit (10) but at most the hub's CatchUpLimit
// (100) of its stream's events behind the window catches up from the log once its connection
// reads again, every event once and in order; further behind, it is closed lagging after a
// gap-free start of them. Whether the log counts (Counter) or is read to count.
func TestCatchUpLimit(t *testing.T) {
	for _, counted := range []bool{true, false} {
		for _, tc := range []struct {
			behind  int
			lagging bool
		}{{behind: 60}, {behind: 100}, {behind: 140, lagging: true}} {
			t.Run(fmt.Sprintf("counted=%v/behind=%d", counted, tc.behind), func(t *testing.T) {
				e := newCatchUpEnv(t, counted, HubOptions{CatchUpLimit: 100})
				out := newRecSender(codec.JSON)
				out.hold = true
				cl := &closings{reasons: map[string]string{}}
				e.subscribe(t, "s", out, cl, nil)
				// Behind by tc.behind: the window's 16 and the rest behind its floor.
				want := e.commit(tc.behind+16, 100)
				out.release()
				if tc.lagging {
					eventually(t, "the lagging close", func() bool { return cl.get()["s"] == ReasonLagging })
					if got := out.got("s"); !slices.Equal(got, want[:len(got)]) {
						t.Fatalf("lagging: got %v, want a start of %v", got, want)
					}
					return
				}
				eventually(t, "catch-up", func() bool { return len(out.got("s")) >= len(want) })
				if got := out.got("s"); !slices.Equal(got, want) || len(cl.get()) != 0 {
					t.Fatalf("got %v, closings %v; want %v", got, cl.get(), want)
				}
			})
		}
	}
}

// A catch-up whose subject's budget is overdrawn (its CatchUp hook says to wait) waits for it,
// holding no turn of CatchUps (1 here: another subscription catches up meanwhile), and then
// completes, every event once, charged what it read; Unsubscribe and Hub.Close end such a
// wait, and nothing is left running.
func TestCatchUpWaitsForTheBudget(t *testing.T) {
	e := newCatchUpEnv(t, true, HubOptions{CatchUps: 1})
	out := newRecSender(codec.JSON)
	out.hold = true
	cl := &closings{reasons: map[string]string{}}
	var wait, asked, charged atomic.Int64 // wait: what the budget says, in ns
	wait.Store(int64(5 * time.Millisecond))
	budget := func(read int) time.Duration {
		if read > 0 {
			charged.Add(int64(read))
			return 0
		}
		asked.Add(1)
		return time.Duration(wait.Load())
	}
	paced := e.subscribe(t, "paced", out, cl, budget)
	free := e.subscribe(t, "free", out, cl, nil)
	want := e.commit(200, 100)
	out.release()
	eventually(t, "the other subscription's catch-up", func() bool {
		return len(out.got("free")) == len(want) && e.h.CatchUpsRunning() == 1
	})
	eventually(t, "waits for the budget", func() bool { return asked.Load() >= 3 })
	if n := len(out.got("paced")); n != 0 || e.h.CatchUpsRunning() != 1 || charged.Load() != 0 {
		t.Fatalf("while the budget is overdrawn: %d events sent, %d catch-ups running, %d charged",
			n, e.h.CatchUpsRunning(), charged.Load())
	}
	wait.Store(0)
	eventually(t, "the catch-up", func() bool { return len(out.got("paced")) >= len(want) })
	if got := out.got("paced"); !slices.Equal(got, want) || len(cl.get()) != 0 {
		t.Fatalf("got %v, closings %v; want %v", got, cl.get(), want)
	}
	if n := charged.Load(); n < int64(len(want)-16) || n > int64(len(want)) {
		t.Fatalf("charged %d events; %d were read from the log", n, len(want)-16)
	}

	// Waiting again: Unsubscribe ends the wait, and Close another one's, unannounced.
	e.h.Unsubscribe(paced)
	e.h.Unsubscribe(free)
	wait.Store(int64(time.Hour))
	gone := e.subscribe(t, "gone", out, cl, budget)
	e.subscribe(t, "closed", out, cl, budget)
	before := asked.Load()
	e.commit(100, 100)
	eventually(t, "catch-ups waiting", func() bool { return e.h.CatchUpsRunning() == 2 && asked.Load() >= before+2 })
	e.h.Unsubscribe(gone)
	eventually(t, "the unsubscribed one's wait to end", func() bool { return e.h.CatchUpsRunning() == 1 })
	done := make(chan struct{})
	go func() { e.h.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waits for a catch-up waiting for its budget")
	}
	if e.h.CatchUpsRunning() != 0 || len(cl.get()) != 0 {
		t.Fatalf("after Close: %d catch-ups, closings %v", e.h.CatchUpsRunning(), cl.get())
	}
	leaktest.Check(t, 5*time.Second)
}

// readsLog is a countingLog that records how many events each read of a stream asked for.
type readsLog struct {
	countingLog
	mu     sync.Mutex
	limits []int
}

func (l *readsLog) ReadStream(ctx context.Context, s Stream, after, upto int64, limit int) ([]Event, error) {
	l.mu.Lock()
	l.limits = append(l.limits, limit)
	l.mu.Unlock()
	return l.countingLog.ReadStream(ctx, s, after, upto, limit)
}

// A catch-up page of large events holds about catchUpPageBytes (at least one event), not
// catchUpPage events: the first read's events size the next reads, and the events left out
// of a page are not kept alive by it. Every event arrives once, in order.
func TestCatchUpPagesBoundedInBytes(t *testing.T) {
	const size = 80 << 10
	e := newCatchUpEnv(t, true, HubOptions{RecentBytes: 1 << 20})
	rl := &readsLog{countingLog: countingLog{e.ll}}
	e.log = rl
	out := &stepSender{c: codec.JSON, got: map[string][]int64{}}
	cl := &closings{reasons: map[string]string{}}
	sub := e.subscribe(t, "s", out, cl, nil)
	want := e.commit(40, size)
	fit := catchUpPageBytes / (size + 100) // the events of a page
	pages := 0
	for len(out.got["s"]) < len(want) && pages < 100 {
		out.pull(1 << 30)
		eventually(t, "the page", func() bool { return e.h.CatchUpsRunning() == 0 })
		sub.mu.Lock()
		page := sub.behind
		bytes := 0
		for i := range page {
			bytes += eventBytes(&page[i])
		}
		for _, ev := range page[len(page):cap(page)] {
			if ev.Payload != nil {
				t.Errorf("a page of %d keeps event %d alive", len(page), ev.Seq)
			}
		}
		sub.mu.Unlock()
		if len(page) > 0 {
			pages++
		}
		if bytes > catchUpPageBytes && len(page) > 1 {
			t.Fatalf("a page of %d events holds %d bytes", len(page), bytes)
		}
	}
	if got := out.got["s"]; !slices.Equal(got, want) || len(cl.get()) != 0 {
		t.Fatalf("got %v, closings %v; want %v", got, cl.get(), want)
	}
	rl.mu.Lock()
	limits := slices.Clone(rl.limits)
	rl.mu.Unlock()
	if len(limits) < 2 || limits[0] != catchUpFirstRead || slices.Max(limits[1:]) > fit || pages > (len(want)+fit-1)/fit+1 {
		t.Fatalf("reads asked for %v events, %d pages; want %d, then at most %d", limits, pages, catchUpFirstRead, fit)
	}
}
