package tracker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/internal/heaptest"
	"github.com/ballet/gateway/tracker"
)

const mib = 1 << 20

// heapWhileListing sends n concurrent GETs of path and returns how much the live heap
// (after a GC) grew while every one of them held its answer at its first write, and what
// each answer held: its items and whether it had a next.
func heapWhileListing(t *testing.T, e *restEnv, n int, path string) (growth int64, items []int, next []bool) {
	t.Helper()
	held := heaptest.NewHolder(n)
	srv := httptest.NewServer(held.Wrap(tracker.NewHandler(e.svc, authtest.NewVerifier(t, e.iss, audience), nil)))
	defer srv.Close()
	tok, err := e.token("vic")
	if err != nil {
		t.Fatal(err)
	}
	items, next = make([]int, n), make([]bool, n)
	growth = held.Growth(t, n, 5*time.Minute, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := srv.Client().Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var page struct {
			Items []struct {
				Key string `json:"key"`
			} `json:"items"`
			Next *string `json:"next"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		items[i], next[i] = len(page.Items), page.Next != nil
		return nil
	})
	return growth, items, next
}

// TestListingHeap: a project of 500 items of 64 KiB (descriptions of 16,384 four-byte
// characters, the longest allowed), listed by 10 concurrent requests over HTTP on Postgres.
// Each answers a page of 100 (~6.5 MB) streamed an item at a time, so that while all ten hold
// their page the live heap grows by less than 150 MiB (about 66 MiB measured); listing the
// whole project at once would hold 33 MB per request, 330 MB for ten, over twice the bound.
// One page of 500 holds about five times a page of 100.
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
	createItems(t, e, "WEB", 500, desc)

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
