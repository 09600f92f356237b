package streams_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/memlog"
)

// noLeaks fails the test if goroutines it started outlive it.
func noLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Fatalf("%d goroutines leaked:\n%s", runtime.NumGoroutine()-before, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

type sink struct {
	mu      sync.Mutex
	events  []streams.Event
	batches int
	maxLen  int
	errs    []string
}

func (s *sink) add(evs []streams.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
	s.maxLen = max(s.maxLen, len(evs))
	for _, e := range evs {
		if n := len(s.events); n > 0 && e.Seq <= s.events[n-1].Seq {
			s.errs = append(s.errs, fmt.Sprintf("seq %d after %d", e.Seq, s.events[n-1].Seq))
		}
		s.events = append(s.events, e)
	}
}

func (s *sink) snapshot() []streams.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]streams.Event(nil), s.events...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newEv(id string) streams.NewEvent {
	return streams.NewEvent{ProjectKey: "WEB", Type: "t", EntityType: "item", EntityID: id, EntityKey: "WEB-1"}
}

// appendConcurrently appends n events from 4 goroutines in batches of 1–3 and returns the last
// seq.
func appendConcurrently(t *testing.T, a streams.Appender, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; i < n/4; {
				k := min(1+i%3, n/4-i)
				var evs []streams.NewEvent
				for j := range k {
					evs = append(evs, newEv(fmt.Sprintf("%s-w%d-%d", prefix, w, i+j)))
				}
				if _, err := a.Append(context.Background(), evs...); err != nil {
					t.Error(err)
					return
				}
				i += k
			}
		})
	}
	wg.Wait()
}

func checkExactlyOnce(t *testing.T, s *sink, want int, prefix string) {
	t.Helper()
	if len(s.errs) > 0 {
		t.Fatalf("out of order: %v", s.errs)
	}
	evs := s.snapshot()
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.EntityID] {
			t.Fatalf("%s delivered twice", e.EntityID)
		}
		seen[e.EntityID] = true
		if len(e.EntityID) < len(prefix) || e.EntityID[:len(prefix)] != prefix {
			t.Fatalf("unexpected event %s", e.EntityID)
		}
	}
	if len(seen) != want {
		t.Fatalf("delivered %d events, want %d", len(seen), want)
	}
}

func TestTailerDeliversEverythingOnceInOrder(t *testing.T) {
	noLeaks(t)
	l := memlog.New()
	defer l.Close()
	ctx := context.Background()
	// Events before Start are not the tailer's.
	old, err := l.Append(ctx, newEv("old-1"), newEv("old-2"))
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	tl := streams.NewTailer(l, s.add, &streams.TailerOptions{Batch: 7})
	if err := tl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	if tl.Position() != old {
		t.Fatalf("Position after Start = %d, want head %d", tl.Position(), old)
	}
	appendConcurrently(t, l, "new", 2000)
	head, _ := l.Head(ctx)
	waitFor(t, "the tailer to reach the head", func() bool { return tl.Position() == head })
	checkExactlyOnce(t, &s, 2000, "new")
	if s.maxLen > 7 {
		t.Fatalf("sink got a batch of %d, Batch is 7", s.maxLen)
	}
}

// faultyLog fails reads and waits on demand, and can misbehave by repeating events.
type faultyLog struct {
	streams.Log
	failReads  atomic.Int32 // the next n ReadAfter calls fail
	failWaits  atomic.Int32 // the next n Wait calls fail
	repeatOnce atomic.Bool  // the next ReadAfter also returns the event at `after`
	failHead   bool
}

var errBroken = errors.New("connection lost")

func (f *faultyLog) Head(ctx context.Context) (int64, error) {
	if f.failHead {
		return 0, errBroken
	}
	return f.Log.Head(ctx)
}

func (f *faultyLog) ReadAfter(ctx context.Context, after int64, limit int) ([]streams.Event, error) {
	if f.failReads.Add(-1) >= 0 {
		return nil, errBroken
	}
	if after > 0 && f.repeatOnce.CompareAndSwap(true, false) {
		return f.Log.ReadAfter(ctx, after-1, limit)
	}
	return f.Log.ReadAfter(ctx, after, limit)
}

func (f *faultyLog) Wait(ctx context.Context, after int64) error {
	if f.failWaits.Add(-1) >= 0 {
		return errBroken
	}
	return f.Log.Wait(ctx, after)
}

func TestTailerRetriesWithoutSkipping(t *testing.T) {
	noLeaks(t)
	ml := memlog.New()
	defer ml.Close()
	f := &faultyLog{Log: ml}
	var s sink
	var errs atomic.Int32
	tl := streams.NewTailer(f, s.add, &streams.TailerOptions{Batch: 5, OnError: func(err error) {
		if !errors.Is(err, errBroken) && err.Error() == "" {
			t.Errorf("OnError(%v)", err)
		}
		errs.Add(1)
	}})
	if err := tl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	for round := range 3 {
		f.failReads.Store(2)
		f.failWaits.Store(1)
		appendConcurrently(t, ml, fmt.Sprintf("x%d", round), 100)
		if round == 1 {
			f.repeatOnce.Store(true) // a broken log: the tailer must not deliver twice
		}
		head, _ := ml.Head(context.Background())
		waitFor(t, "the tailer to reach the head", func() bool { return tl.Position() == head })
	}
	checkExactlyOnce(t, &s, 300, "x")
	if errs.Load() < 3 {
		t.Fatalf("OnError called %d times", errs.Load())
	}
}

func TestTailerLifecycle(t *testing.T) {
	noLeaks(t)
	ml := memlog.New()
	defer ml.Close()

	// Close before Start, and Start after Close.
	tl := streams.NewTailer(ml, func([]streams.Event) {}, nil)
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tl.Start(context.Background()); !errors.Is(err, streams.ErrClosed) {
		t.Fatalf("Start after Close = %v", err)
	}

	// Start twice; Close twice; no sink call after Close returns.
	var closed atomic.Bool
	var lateCalls atomic.Int32
	tl = streams.NewTailer(ml, func([]streams.Event) {
		if closed.Load() {
			lateCalls.Add(1)
		}
	}, nil)
	if err := tl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tl.Start(context.Background()); err == nil {
		t.Fatal("second Start succeeded")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := ml.Append(context.Background(), newEv(fmt.Sprint(i))); err != nil {
				t.Error(err)
				return
			}
		}
	})
	time.Sleep(20 * time.Millisecond)
	tl.Close()
	closed.Store(true)
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	if n := lateCalls.Load(); n != 0 {
		t.Fatalf("sink called %d times after Close returned", n)
	}

	// Start fails when the head cannot be read.
	tl = streams.NewTailer(&faultyLog{Log: ml, failHead: true}, func([]streams.Event) {}, nil)
	if err := tl.Start(context.Background()); !errors.Is(err, errBroken) {
		t.Fatalf("Start with a failing Head = %v", err)
	}
	tl.Close()
}

func TestTailerStopsWithContextAndClosedLog(t *testing.T) {
	noLeaks(t)
	ml := memlog.New()
	ctx, cancel := context.WithCancel(context.Background())
	var s sink
	tl := streams.NewTailer(ml, s.add, nil)
	if err := tl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	done := make(chan struct{})
	go func() { tl.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Close hung after the context ended")
	}

	// A closed log ends the tailer's goroutine; Close still returns.
	tl = streams.NewTailer(ml, s.add, nil)
	if err := tl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ml.Close()
	tl.Close()
}

// Batches are bounded in bytes as well as in events: a run of large events is handed over in
// batches of about BatchBytes, then the batches grow back once the events are small; every
// event arrives once and in order.
func TestTailerBatchesBoundedInBytes(t *testing.T) {
	l := memlog.New()
	defer l.Close()
	var mu sync.Mutex
	var sizes []int
	var seqs []int64
	tl := streams.NewTailer(l, func(evs []streams.Event) {
		mu.Lock()
		defer mu.Unlock()
		b := 0
		for _, e := range evs {
			b += len(e.Payload)
			seqs = append(seqs, e.Seq)
		}
		sizes = append(sizes, b)
	}, &streams.TailerOptions{Batch: 64, BatchBytes: 1 << 20})
	big := []byte(`{"d":"` + strings.Repeat("x", 256<<10) + `"}`)
	var evs []streams.NewEvent
	for i := range 40 {
		evs = append(evs, streams.NewEvent{ProjectKey: "A", Type: "t", EntityType: "item", EntityID: fmt.Sprint(i), ActorKind: "human", Payload: big})
	}
	for range 200 {
		evs = append(evs, streams.NewEvent{ProjectKey: "A", Type: "t", EntityType: "item", EntityID: "s", ActorKind: "human"})
	}
	if err := tl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	// In one transaction, so that the tailer reads them in batches of its choosing.
	if _, err := l.Append(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(seqs)
		mu.Unlock()
		if n == len(evs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tailer handed over %d of %d events", n, len(evs))
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, s)
		}
	}
	for i, b := range sizes[1:] { // the first read, of a sixteenth of Batch, is the probe
		if b > 2<<20 {
			t.Fatalf("batch %d holds %d bytes of payload, want about 1 MiB at most (%v)", i+1, b, sizes)
		}
	}
	if len(sizes) > 40 {
		t.Fatalf("%d batches: they did not grow back once the events were small (%v)", len(sizes), sizes)
	}
}

// With Coalesce, events committed within it of a wake-up go out in one dispatch; without
// (the default), the tailer reads as soon as it wakes: an event goes out alone while the next
// is not yet committed.
func TestTailerCoalesce(t *testing.T) {
	for _, d := range []time.Duration{0, 2 * time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			l := memlog.New()
			defer l.Close()
			s := &sink{}
			tl := streams.NewTailer(l, s.add, &streams.TailerOptions{Coalesce: d})
			if err := tl.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer tl.Close()
			// A first event, once dispatched, shows the tailer waiting for the log's wake-ups:
			// on a loaded machine its first read could otherwise come after the first append.
			if _, err := l.Append(context.Background(), newEv("first")); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the first event", func() bool { return len(s.snapshot()) == 1 })
			s.mu.Lock()
			s.batches = 0
			s.mu.Unlock()
			for i := range 2 {
				if _, err := l.Append(context.Background(), newEv(fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
				if d == 0 {
					waitFor(t, "the event", func() bool { return len(s.snapshot()) == i+2 })
				}
			}
			waitFor(t, "both events", func() bool { return len(s.snapshot()) == 3 })
			s.mu.Lock()
			defer s.mu.Unlock()
			if want := map[bool]int{true: 2, false: 1}[d == 0]; s.batches != want {
				t.Fatalf("Coalesce %v: %d dispatches, want %d", d, s.batches, want)
			}
		})
	}
}
