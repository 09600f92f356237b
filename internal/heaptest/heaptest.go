// Package heaptest measures what HTTP answers hold on the heap: a Holder stops every answer of
// a handler at its first write, when its body is built, so that the live heap can be read
// while n of them hold theirs at once. For tests only; the measure is this process's heap, so
// the tests that use it do not run in parallel with others.
package heaptest

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Holder holds the answers of the handlers it wraps at their first write until the
// measure is taken.
type Holder struct {
	arrived chan struct{}
	release chan struct{}
}

// NewHolder returns a Holder for up to n answers held at once.
func NewHolder(n int) *Holder {
	return &Holder{arrived: make(chan struct{}, n), release: make(chan struct{})}
}

// Wrap returns next with its answers held at their first write.
func (h *Holder) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&heldWriter{ResponseWriter: w, h: h}, r)
	})
}

type heldWriter struct {
	http.ResponseWriter
	h    *Holder
	once sync.Once
}

func (w *heldWriter) Write(b []byte) (int, error) {
	w.once.Do(func() {
		w.h.arrived <- struct{}{}
		<-w.h.release
	})
	return w.ResponseWriter.Write(b)
}

// LiveHeap is the heap in use after a collection.
func LiveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Growth runs do(0) … do(n-1) at once, each a request answered through h, and returns how
// much the live heap grew while all n answers were held; then it lets them go and waits for
// them. An error of do, or answers not all held within within, fails t.
func (h *Holder) Growth(t testing.TB, n int, within time.Duration, do func(i int) error) int64 {
	t.Helper()
	base := LiveHeap()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := do(i); err != nil {
				errs <- err
			}
		})
	}
	fail := func(err error) {
		close(h.release)
		wg.Wait()
		t.Fatal(err)
	}
	deadline := time.After(within)
	for range n {
		select {
		case <-h.arrived:
		case err := <-errs:
			fail(err)
		case <-deadline:
			fail(fmt.Errorf("the %d answers were not all held within %v", n, within))
		}
	}
	growth := LiveHeap() - base
	close(h.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return growth
}
