package planner_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/tracker"
)

type sessionsPage struct {
	Sessions []sessionJSON `json:"sessions"`
	Next     *string       `json:"next"`
}

// listSessions loads WEB's sessions page by page, query holding the first page's parameters,
// following next; between runs after each page but the last. It returns the ids in order
// and the number of pages.
func (e *restEnv) listSessions(t *testing.T, query string, between func(page int)) (ids []string, pages int) {
	t.Helper()
	path := "/api/v1/projects/WEB/planner/sessions" + query
	for {
		r := e.do(t, "GET", path, "victor", "", "")
		var p sessionsPage
		decodeJSON(t, r, &p)
		var raw map[string]json.RawMessage
		decodeJSON(t, r, &raw)
		if r.status != 200 || p.Sessions == nil || raw["next"] == nil {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		pages++
		for _, s := range p.Sessions {
			ids = append(ids, s.ID)
		}
		if p.Next == nil {
			return ids, pages
		}
		if between != nil {
			between(pages)
		}
		sep := "?"
		if query != "" {
			sep = query + "&"
		}
		path = "/api/v1/projects/WEB/planner/sessions" + sep + "after=" + url.QueryEscape(*p.Next)
	}
}

// TestRESTSessionPaging: the sessions listing in pages over HTTP on both stores, newest
// first, with sessions created between the pages, and 400 problems naming limit or after.
func TestRESTSessionPaging(t *testing.T) {
	for _, kind := range []string{"memory", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newRESTEnv(t, kind)
			const sessions = "/api/v1/projects/WEB/planner/sessions"
			create := func() string {
				t.Helper()
				r := e.do(t, "POST", sessions, "alice", "", "")
				var s sessionJSON
				decodeJSON(t, r, &s)
				if r.status != 201 {
					t.Fatalf("create: %d %s", r.status, r.body)
				}
				return s.ID
			}
			var created []string
			for range 12 {
				created = append(created, create())
			}
			all, pages := e.listSessions(t, "?limit=500", nil)
			if len(all) != 12 || pages != 1 {
				t.Fatalf("one page of 500: %d sessions in %d pages", len(all), pages)
			}
			slices.Reverse(created)
			if !slices.Equal(all, created) {
				t.Fatalf("not newest first: %v (created %v)", all, created)
			}
			for _, c := range []struct {
				query string
				pages int
			}{{"", 1}, {"?limit=1", 12}, {"?limit=5", 3}, {"?limit=12", 1}, {"?limit=11", 2}} {
				ids, pages := e.listSessions(t, c.query, nil)
				if !slices.Equal(ids, all) || pages != c.pages {
					t.Fatalf("%q: %d pages, %v, want %d pages of %v", c.query, pages, ids, c.pages, all)
				}
			}
			// Created between pages: newer sessions are not listed by a walk under way, and
			// none is repeated or skipped.
			newer := 0
			ids, _ := e.listSessions(t, "?limit=4", func(int) { create(); newer++ })
			if !slices.Equal(ids, all) || newer != 2 {
				t.Fatalf("listed while creating %d: %v, want %v", newer, ids, all)
			}
			if ids, _ := e.listSessions(t, "", nil); len(ids) != 14 || !slices.Equal(ids[2:], all) {
				t.Fatalf("a fresh listing: %v", ids)
			}

			r := e.do(t, "GET", sessions+"?limit=1", "victor", "", "")
			var first sessionsPage
			decodeJSON(t, r, &first)
			good := *first.Next
			for _, c := range []struct{ query, param string }{
				{"limit=0", "limit"},
				{"limit=501", "limit"},
				{"limit=abc", "limit"},
				{"limit=", "limit"},
				{"after=", "after"},
				{"after=abc", "after"},
				{"after=" + good + "A", "after"},
				{"after=" + httpapi.EncodeCursor("items", "WEB", "1"), "after"},
				{"after=" + httpapi.EncodeCursor("sessions", "OPS", "1", tracker.NewID(time.Now())), "after"},
				{"after=" + httpapi.EncodeCursor("sessions", "WEB", "1", "WEB-1"), "after"},
				{"after=" + httpapi.EncodeCursor("sessions", "WEB", "x", tracker.NewID(time.Now())), "after"},
				{"after=" + httpapi.EncodeCursor("sessions", "WEB", "-1", tracker.NewID(time.Now())), "after"},
				{"after=" + httpapi.EncodeCursor("sessions", "WEB", "9223372036854775807", tracker.NewID(time.Now())), "after"},
				{"after=" + httpapi.EncodeCursor("sessions", "WEB", "1"), "after"},
			} {
				r := e.do(t, "GET", sessions+"?"+c.query, "victor", "", "")
				var p struct {
					Status int    `json:"status"`
					Detail string `json:"detail"`
				}
				decodeJSON(t, r, &p)
				if r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" || p.Status != 400 || !strings.HasPrefix(p.Detail, c.param+": ") {
					t.Errorf("%s: %d %s, want a 400 problem naming %s", c.query, r.status, r.body, c.param)
				}
			}
			// A cursor far in the past lists nothing; one far ahead lists everything.
			for _, c := range []struct {
				us   string
				want int
			}{{"0", 0}, {"253402300799999999", 14}} {
				q := "?after=" + httpapi.EncodeCursor("sessions", "WEB", c.us, "ffffffff-ffff-7fff-bfff-ffffffffffff")
				if ids, _ := e.listSessions(t, q, nil); len(ids) != c.want {
					t.Errorf("after %s µs: %d sessions, want %d", c.us, len(ids), c.want)
				}
			}
		})
	}
}
