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
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/tracker"
)

const mib = 1 << 20

// heapWhileListing sends n concurrent GETs of path and returns how much the live heap
// (after a GC) grew while every one of them held its answer at its first write, and what
// each answer held: its items and whether it had a next.
func heapWhileListing(t *testing.T, e *restEnv, n int, path string) (growth int64, items []int, next []bool) {
	t.Helper()
	held := heaptest.NewHolder(n)
	opts := &tracker.HandlerOptions{Listings: httpapi.NewListings(&httpapi.ListingOptions{PerSubject: n, Replica: n})}
	srv := httptest.NewServer(held.Wrap(tracker.NewHandler(e.svc, authtest.NewVerifier(t, e.iss, audience), opts)))
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

// TestListingHeap: a project of 100 items of 64 KiB (descriptions of 16,384 four-byte
// characters, the longest allowed), listed by 10 concurrent requests of pages of 500 over HTTP
// on Postgres. Each page ends at the page budget (httpapi.DefaultPageBytes, 1 MiB: 15 such
// items) rather than at its limit, and is streamed an item at a time, so that while all ten
// hold their page the live heap grows by less than 10 pages of 1 MiB and a half; pages of 500
// without the budget would hold 33 MB each, 330 MB for ten. 100 items are enough for a page.
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
	createItems(t, e, "WEB", 100, desc)

	const clients = 10
	growth, items, next := heapWhileListing(t, e, clients, "/api/v1/projects/WEB/items?limit=500")
	perPage := httpapi.DefaultPageBytes / (len(desc) + 256 + 64) // Item.Size: the text, the keys, the overhead
	for i := range clients {
		if items[i] < perPage-1 || items[i] > perPage+1 || !next[i] {
			t.Fatalf("listing %d: %d items, next %v; want a page of about %d and a next", i, items[i], next[i], perPage)
		}
	}
	t.Logf("%d concurrent pages of %d items of 64 KiB: the live heap grew by %.1f MiB while all held their page", clients, items[0], float64(growth)/mib)
	if bound := int64(clients * httpapi.DefaultPageBytes * 3 / 2); growth > bound {
		t.Errorf("the live heap grew by %.1f MiB, more than %.1f MiB", float64(growth)/mib, float64(bound)/mib)
	}
}
