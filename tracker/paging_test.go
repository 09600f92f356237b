package tracker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/tracker"
)

// createItems creates n items in project as bob through the service, every twentieth
// ready; it returns the keys of the ready ones.
func createItems(t *testing.T, e *restEnv, project string, n int, description string) (ready []string) {
	t.Helper()
	bob := tracker.Actor{Kind: tracker.ActorHuman, Subject: "bob"}
	for i := 1; i <= n; i++ {
		in := tracker.ItemInput{Title: fmt.Sprint("item ", i), Description: description}
		if i%20 == 0 {
			in.State = tracker.StateReady
		}
		it, err := e.svc.CreateItem(context.Background(), bob, project, in)
		if err != nil {
			t.Fatalf("create item %d: %v", i, err)
		}
		if in.State != "" {
			ready = append(ready, it.Key)
		}
	}
	return ready
}

func keyRange(project string, from, to int) []string {
	var keys []string
	for n := from; n <= to; n++ {
		keys = append(keys, tracker.ItemKey(project, int64(n)))
	}
	return keys
}

// TestRESTPaging: the items listing in pages of 1, 100 (the default) and 500, with filters,
// and items created and deleted between the pages, over HTTP on both stores.
func TestRESTPaging(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *restEnv) {
		e.seed()                                   // WEB-1..3, API-1
		ready := createItems(t, e, "WEB", 517, "") // WEB-4..520
		all := keyRange("WEB", 1, 520)

		for _, c := range []struct {
			query string
			sizes []int
		}{
			{"", []int{100, 100, 100, 100, 100, 20}},
			{"?limit=100", []int{100, 100, 100, 100, 100, 20}},
			{"?limit=500", []int{500, 20}},
			{"?limit=260", []int{260, 260}},
		} {
			pages := e.listPages("vic", "WEB", c.query, nil)
			var sizes []int
			for _, p := range pages {
				sizes = append(sizes, len(p.Items))
				if *p.Seq != e.head() {
					t.Fatalf("%q: seq %d, head %d", c.query, *p.Seq, e.head())
				}
			}
			if keys := pageKeys(pages); !slices.Equal(sizes, c.sizes) || !slices.Equal(keys, all) {
				t.Fatalf("%q: pages of %v, %d keys", c.query, sizes, len(keys))
			}
		}
		// Pages of 1, with the filters.
		pages := e.listPages("vic", "WEB", "?limit=1&state=ready&q=ITEM", nil)
		if keys := pageKeys(pages); !slices.Equal(keys, ready) || len(pages) != len(ready) {
			t.Fatalf("ready items one by one: %d pages, %v, want %v", len(pages), keys, ready)
		}
		// "item 51" is in the titles of WEB-54 and WEB-513..520 ("item 510" to "item 517").
		if keys := pageKeys(e.listPages("vic", "WEB", "?q=item%2051&limit=2", nil)); !slices.Equal(keys, append([]string{"WEB-54"}, keyRange("WEB", 513, 520)...)) {
			t.Fatalf("q=item 51: %v", keys)
		}
		r := e.must(200, "GET", "/api/v1/projects/WEB/items?limit=1", "vic", "")
		if !strings.HasSuffix(string(r.body), `],"next":"`+httpapi.EncodeCursor("items", "WEB", "1")+`"}`+"\n") {
			t.Fatalf("a page of one: %s", r.body)
		}
		r = e.must(200, "GET", "/api/v1/projects/API/items", "carol", "")
		if !strings.HasSuffix(string(r.body), `],"next":null}`+"\n") {
			t.Fatalf("the last page: %s", r.body)
		}
		if r := e.must(200, "HEAD", "/api/v1/projects/WEB/items?limit=3", "vic", ""); len(r.body) != 0 {
			t.Fatalf("HEAD: %q", r.body)
		}

		// Created and deleted between pages: every item that exists throughout comes once.
		del := func(key string) { e.must(204, "DELETE", "/api/v1/items/"+key, "bob", "") }
		pages = e.listPages("vic", "WEB", "?limit=100", func(page int) {
			switch page {
			case 1:
				del("WEB-50")  // listed
				del("WEB-101") // first of the next page
				del("WEB-250") // two pages ahead
				e.must(201, "POST", "/api/v1/projects/WEB/items", "bob", `{"title":"new 521"}`)
			case 3:
				del("WEB-300") // the last of this page
				del("WEB-521")
				e.must(201, "POST", "/api/v1/projects/WEB/items", "bob", `{"title":"new 522"}`)
			}
		})
		want := slices.DeleteFunc(slices.Clone(all), func(k string) bool { return k == "WEB-101" || k == "WEB-250" })
		want = append(want, "WEB-522")
		if keys := pageKeys(pages); !slices.Equal(keys, want) {
			t.Fatalf("listed while writing:\n%v\nwant\n%v", keys, want)
		}
	})
}

// TestRESTPagingErrors: a limit outside 1..500 or not an integer, and an after that is not
// a cursor of the project's items listing, are 400 problems naming the parameter.
func TestRESTPagingErrors(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *restEnv) {
		e.seed()
		createItems(t, e, "WEB", 3, "")
		r := e.must(200, "GET", "/api/v1/projects/WEB/items?limit=2", "vic", "")
		var first itemsPage
		r.json(t, &first)
		var good string
		_ = json.Unmarshal(first.Next, &good)
		before := e.head()
		for _, c := range []struct{ query, param string }{
			{"limit=0", "limit"},
			{"limit=501", "limit"},
			{"limit=abc", "limit"},
			{"limit=", "limit"},
			{"limit=-5", "limit"},
			{"limit=2.5", "limit"},
			{"limit=1e2", "limit"},
			{"limit=0&after=" + good, "limit"},
			{"after=", "after"},
			{"after=abc", "after"},
			{"after=" + good + "x", "after"},
			{"after=" + url.QueryEscape(good[:len(good)-2]), "after"},
			{"after=" + httpapi.EncodeCursor("items", "API", "1"), "after"},         // another project's
			{"after=" + httpapi.EncodeCursor("sessions", "WEB", "1", "x"), "after"}, // another listing's
			{"after=" + httpapi.EncodeCursor("items", "WEB", "0"), "after"},
			{"after=" + httpapi.EncodeCursor("items", "WEB", "-1"), "after"},
			{"after=" + httpapi.EncodeCursor("items", "WEB", "two"), "after"},
			{"after=" + httpapi.EncodeCursor("items", "WEB", "99999999999999999999"), "after"},
			{"after=" + strings.Repeat("e", 4000), "after"},
		} {
			r := e.do("GET", "/api/v1/projects/WEB/items?state=ready&"+c.query, "vic", "")
			wantProblem(t, r, 400)
			var p struct{ Detail string }
			r.json(t, &p)
			if !strings.HasPrefix(p.Detail, c.param+": ") {
				t.Errorf("%s: detail %q does not name %s", c.query, p.Detail, c.param)
			}
		}
		if e.head() != before {
			t.Fatal("failed listings appended events")
		}
		// The good cursor still works, with another limit and a filter.
		var second itemsPage
		e.must(200, "GET", "/api/v1/projects/WEB/items?limit=500&after="+good, "vic", "").json(t, &second)
		if keys := pageKeys([]itemsPage{second}); !slices.Equal(keys, keyRange("WEB", 3, 6)) || string(second.Next) != "null" {
			t.Fatalf("after %s: %v next %s", good, keys, second.Next)
		}
	})
}
