package planner_test

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
)

// idleWatchBound is what an idle watch may hold on the heap: a stream subscription's order
// of magnitude, far below a preallocated queue of planner.DefaultWatchQueue outputs.
const idleWatchBound = 4 << 10

// memStats returns the live heap and the goroutine stacks in use, after a collection.
func memStats() (heap, stack int64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc), int64(ms.StackInuse)
}

// idleWatches opens n watches that receive nothing on one session of a memory-backed
// Service with the default options, and returns the heap and the stack they hold, per
// watch. The watches end with the test.
func idleWatches(t testing.TB, n int) (heap, stack float64) {
	b := newBackend(t, "memory")
	svc, _ := b.service(t, nil, nil)
	id := b.newSession(t, svc)
	ctx := ctxT(t)
	fn := func(planner.Output) bool { return true }
	stops := make([]func(), 0, n)
	t.Cleanup(func() {
		for _, stop := range stops {
			stop()
		}
	})
	open := func() {
		_, stop, err := svc.Watch(ctx, victor, id, fn)
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, stop)
	}
	open() // what the first watch of a session sets up once
	h0, s0 := memStats()
	for range n {
		open()
	}
	h1, s1 := memStats()
	return float64(h1-h0) / float64(n), float64(s1-s0) / float64(n)
}

// An idle watch holds under a KiB of heap, not a queue sized for its bound. Not parallel:
// the heap is this test's.
func TestIdleWatchHeap(t *testing.T) {
	heap, stack := idleWatches(t, 1000)
	t.Logf("per idle watch: %.0f B of heap, %.0f B of stack", heap, stack)
	if heap > idleWatchBound {
		t.Fatalf("an idle watch holds %.0f B of heap, bound %d", heap, idleWatchBound)
	}
}

// BenchmarkIdleWatch opens b.N idle watches and reports the heap and stack each holds
// (run it with -benchtime Nx; the time is not a measurement).
func BenchmarkIdleWatch(b *testing.B) {
	heap, stack := idleWatches(b, b.N)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(heap, "heap-B/watch")
	b.ReportMetric(stack, "stack-B/watch")
}

// blockedWatch is a watch whose fn waits for release before each call returns; it counts
// the calls that returned and keeps the first keep outputs in its watcher.
type blockedWatch struct {
	watcher
	release chan struct{}
	got     atomic.Int64
}

func newBlockedWatch(t testing.TB, svc *planner.Service, session string, keep int) *blockedWatch {
	t.Helper()
	w := &blockedWatch{watcher: watcher{ch: make(chan planner.Output, keep)}, release: make(chan struct{})}
	t.Cleanup(w.unblock) // before Close, which waits for fn
	_, stop, err := svc.Watch(ctxT(t), alice, session, func(o planner.Output) bool {
		if len(w.ch) < cap(w.ch) {
			w.ch <- o
		}
		<-w.release
		w.got.Add(1)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return w
}

func (w *blockedWatch) unblock() {
	select {
	case <-w.release:
	default:
		close(w.release)
	}
}

// publish sends n text outputs numbered from first on the bus, as a turn of another
// replica would.
func publish(t testing.TB, bus planner.Bus, session string, first, n int) {
	t.Helper()
	ctx := ctxT(t)
	for i := range n {
		o := planner.Output{Session: session, Type: planner.OutputText, Text: strconv.Itoa(first + i)}
		if err := bus.Publish(ctx, planner.Note{Session: session, Output: &o}); err != nil {
			t.Fatal(err)
		}
	}
}

// The outputs queued for a watch that does not keep up are held while queued and given
// back once it has taken them. Not parallel: the heap is this test's.
func TestWatchQueueShrinksWhenDrained(t *testing.T) {
	const watches, queued = 50, 2000
	b := newBackend(t, "memory")
	bus := planner.NewMemoryBus()
	svc, _ := b.service(t, nil, bus)
	id := b.newSession(t, svc)
	base, _ := memStats()
	ws := make([]*blockedWatch, watches)
	for i := range ws {
		ws[i] = newBlockedWatch(t, svc, id, 0)
	}
	// The numbers' strings are shared by every watch: what each watch holds is its queue.
	publish(t, bus, id, 1, queued)
	full, _ := memStats()
	for _, w := range ws {
		w.unblock()
	}
	waitFor(t, "every output delivered", func() bool {
		for _, w := range ws {
			if w.got.Load() < queued {
				return false
			}
		}
		return true
	})
	drained, _ := memStats()
	t.Logf("%d watches: heap %+d B with %d outputs queued each, %+d B once drained",
		watches, full-base, queued, drained-base)
	if per := (drained - base) / watches; per > idleWatchBound {
		t.Fatalf("a drained watch holds %d B of heap, bound %d", per, idleWatchBound)
	}
}

// A watch with WatchQueue outputs queued ends when one more comes: every output queued
// before is delivered, in order, then OutputLagging, and nothing after it.
func TestWatchQueueBound(t *testing.T) {
	const bound = 8
	b := newBackend(t, "memory")
	bus := planner.NewMemoryBus()
	svc, _ := b.service(t, &planner.Options{WatchQueue: bound}, bus)
	id := b.newSession(t, svc)
	w := newBlockedWatch(t, svc, id, 2*bound)
	publish(t, bus, id, 1, 1)
	if o := w.next(t); o.Text != "1" {
		t.Fatalf("first call %+v", o)
	}
	// fn holds output 1; 2 to bound+1 fill the queue, bound+2 is one too many.
	publish(t, bus, id, 2, bound+3)
	w.unblock()
	for i := 2; i <= bound+1; i++ {
		if o := w.next(t); o.Type != planner.OutputText || o.Text != strconv.Itoa(i) {
			t.Fatalf("call %d: %+v", i, o)
		}
	}
	if o := w.next(t); o.Type != planner.OutputLagging || o.Session != id {
		t.Fatalf("call after the queued outputs: %+v, want lagging", o)
	}
	publish(t, bus, id, bound+5, 1)
	w.quiet(t, 200*time.Millisecond)
}
