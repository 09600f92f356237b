package tracker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/tracker"
)

// heldWriter holds a response at its first write until release is closed, so that the heap
// can be measured while every listing holds its page.
type heldWriter struct {
	http.ResponseWriter
	once    sync.Once
	arrived chan<- struct{}
	release <-chan struct{}
}

func (w *heldWriter) Write(b []byte) (int, error) {
	w.once.Do(func() {
		w.arrived <- struct{}{}
		<-w.release
	})
	return w.ResponseWriter.Write(b)
}

const mib = 1 << 20

// heapWhileListing sends n concurrent GETs of path and returns how much the live heap
// (after a GC) grew while every one of them held its answer at its first write, and what
// each answer held: its items and whether it had a next.
func heapWhileListing(t *testing.T, e *restEnv, n int, path string) (growth int64, items []int, next []bool) {
	t.Helper()
	arrived, release := make(chan struct{}, n), make(chan struct{})
	h := tracker.NewHandler(e.svc, authtest.NewVerifier(t, e.iss, audience), nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&heldWriter{ResponseWriter: w, arrived: arrived, release: release}, r)
	}))
	defer srv.Close()
	tok, err := e.token("vic")
	if err != nil {
		t.Fatal(err)
	}
	var before, held runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	items, next = make([]int, n), make([]bool, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := srv.Client().Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var page struct {
				Items []struct {
					Key string `json:"key"`
				} `json:"items"`
				Next *string `json:"next"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != 200 {
				errs <- fmt.Errorf("GET %s: %d %v", path, resp.StatusCode, err)
				return
			}
			items[i], next[i] = len(page.Items), page.Next != nil
		})
	}
	deadline := time.After(5 * time.Minute)
	for range n {
		select {
		case <-arrived:
		case err := <-errs:
			close(release)
			t.Fatal(err)
		case <-deadline:
			close(release)
			t.Fatalf("the %d listings did not all start answering within 5 minutes", n)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&held)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int64(held.HeapAlloc) - int64(before.HeapAlloc), items, next
}

// TestListingHeap: a project of 1,000 items of 64 KiB (descriptions of 16,384 four-byte
// characters, the longest allowed), listed by 10 concurrent requests over HTTP on Postgres.
// Each answers a page of 100 (~6.5 MB) streamed an item at a time, so that while all ten hold
// their page the live heap grows by less than 150 MiB; listing the whole project at once
// would hold 65 MB per request, 650 MB for ten. One page of 500 holds about five times a
// page of 100.
func TestListingHeap(t *testing.T) {
	e := newREST(t, "postgres")
	e.must(201, "POST", "/api/v1/projects", "root", `{"key":"WEB","name":"Web"}`)
	for _, m := range []string{"bob", "vic"} {
		e.must(200, "PUT", "/api/v1/projects/WEB/members/"+m, "root", `{"role":"member"}`)
	}
	desc := strings.Repeat("😀", tracker.DefaultMaxDescriptionBytes/4)
	if len(desc) != tracker.DefaultMaxDescriptionBytes {
		t.Fatalf("description of %d bytes", len(desc))
	}
	createItems(t, e, "WEB", 1000, desc)

	const clients = 10
	growth, items, next := heapWhileListing(t, e, clients, "/api/v1/projects/WEB/items")
	for i := range clients {
		if items[i] != 100 || !next[i] {
			t.Fatalf("listing %d: %d items, next %v; want a page of 100 and a next", i, items[i], next[i])
		}
	}
	t.Logf("%d concurrent pages of 100 items of 80 KB: the live heap grew by %.1f MiB while all held their page", clients, float64(growth)/mib)
	if growth > 150*mib {
		t.Errorf("the live heap grew by %.1f MiB, more than 150 MiB", float64(growth)/mib)
	}
	one, items, _ := heapWhileListing(t, e, 1, "/api/v1/projects/WEB/items?limit=500")
	t.Logf("one page of 500: %d items, the live heap grew by %.1f MiB", items[0], float64(one)/mib)
}
