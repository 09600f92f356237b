package trackertest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// walk lists project's items passing filter page by page, limit at a time, calling between
// after each page but the last, and checks the pages: by number across pages, full but for
// the last, Next the last number when another page follows, seqs that never go back.
func (h *harness) walk(a tracker.Actor, project string, filter tracker.ItemFilter, limit int, between func(page int)) []tracker.ItemList {
	h.t.Helper()
	var (
		pages []tracker.ItemList
		page  = tracker.ItemPage{Limit: limit}
		last  int64
		seq   int64
	)
	for {
		list, err := h.svc.ListItems(ctxT(h.t), a, project, filter, page)
		if err != nil {
			h.t.Fatalf("page %d after %d: %v", len(pages)+1, page.After, err)
		}
		pages = append(pages, list)
		for _, it := range list.Items {
			if it.Number <= last || !filter.Matches(&it) || it.Project != project {
				h.t.Fatalf("page %d after %d: %s after %d (filter %+v)", len(pages), page.After, it.Key, last, filter)
			}
			last = it.Number
		}
		if list.Seq < seq {
			h.t.Fatalf("page %d: seq %d after %d", len(pages), list.Seq, seq)
		}
		seq = list.Seq
		if list.Next == 0 {
			return pages
		}
		if len(list.Items) != limit || list.Next != last {
			h.t.Fatalf("page %d: %d items of %d, next %d after %d", len(pages), len(list.Items), limit, list.Next, last)
		}
		if between != nil {
			between(len(pages))
		}
		page.After = list.Next
	}
}

func keysOf(pages []tracker.ItemList) []string {
	var keys []string
	for _, p := range pages {
		for _, it := range p.Items {
			keys = append(keys, it.Key)
		}
	}
	return keys
}

func webKeys(numbers ...int) []string {
	var keys []string
	for _, n := range numbers {
		keys = append(keys, tracker.ItemKey("WEB", int64(n)))
	}
	return keys
}

func span(from, to int) []int {
	var ns []int
	for n := from; n <= to; n++ {
		ns = append(ns, n)
	}
	return ns
}

func testPaging(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	h.project("API", Alice)
	h.create(Alice, "API", "elsewhere")
	var ready, even []int
	for i := 1; i <= 105; i++ {
		in := tracker.ItemInput{Title: fmt.Sprint("item ", i)}
		if i%3 == 0 {
			in.State, ready = tracker.StateReady, append(ready, i)
		}
		if i%2 == 0 {
			in.Description, even = "an EVEN one", append(even, i)
		}
		if _, err := h.svc.CreateItem(ctx, Bob, "WEB", in); err != nil {
			t.Fatal(err)
		}
	}
	list, err := h.svc.ListItems(ctx, Vic, "WEB", tracker.ItemFilter{}, tracker.ItemPage{})
	if err != nil || len(list.Items) != 100 || list.Next != 100 || list.Seq != h.head() || list.Items[0].Key != "WEB-1" {
		t.Fatalf("the default page: %d items, next %d, seq %d (head %d), %v", len(list.Items), list.Next, list.Seq, h.head(), err)
	}
	all := webKeys(span(1, 105)...)
	for _, c := range []struct {
		limit, pages int
	}{{1, 105}, {7, 15}, {100, 2}, {104, 2}, {105, 1}, {500, 1}} {
		pages := h.walk(Vic, "WEB", tracker.ItemFilter{}, c.limit, nil)
		if keys := keysOf(pages); !slices.Equal(keys, all) || len(pages) != c.pages {
			t.Fatalf("pages of %d: %d pages, %v", c.limit, len(pages), keys)
		}
	}
	// Filters combine with paging.
	readyEven := []int{}
	for _, n := range ready {
		if n%2 == 0 {
			readyEven = append(readyEven, n)
		}
	}
	for _, c := range []struct {
		f     tracker.ItemFilter
		limit int
		want  []int
	}{
		{tracker.ItemFilter{State: tracker.StateReady}, 4, ready},
		{tracker.ItemFilter{Query: "even"}, 10, even},
		{tracker.ItemFilter{State: tracker.StateReady, Query: "Even"}, 1, readyEven},
		{tracker.ItemFilter{State: tracker.StateDone}, 3, nil},
	} {
		if keys := keysOf(h.walk(Vic, "WEB", c.f, c.limit, nil)); !slices.Equal(keys, webKeys(c.want...)) {
			t.Fatalf("filter %+v by %d: %v, want %v", c.f, c.limit, keys, webKeys(c.want...))
		}
	}
	list, err = h.svc.ListItems(ctx, Vic, "WEB", tracker.ItemFilter{}, tracker.ItemPage{After: 105, Limit: 10})
	if err != nil || len(list.Items) != 0 || list.Items == nil || list.Next != 0 {
		t.Fatalf("after the last item: %+v, %v", list, err)
	}
	before := h.head()
	for _, p := range []tracker.ItemPage{{Limit: 501}, {Limit: -1}, {After: -1, Limit: 5}} {
		_, err := h.svc.ListItems(ctx, Vic, "WEB", tracker.ItemFilter{}, p)
		h.wantErr(fmt.Sprintf("page %+v", p), before, err, tracker.ErrInvalid)
	}
	_, err = h.svc.ListItems(ctx, Vic, "NOPE", tracker.ItemFilter{}, tracker.ItemPage{After: 3, Limit: 5})
	h.wantErr("a page of a missing project", before, err, tracker.ErrNotFound)
}

// testPagingWhileWriting: items created and deleted between pages are neither skipped nor
// repeated: every item that exists throughout is listed once, one deleted before its page
// is not, and new ones (numbered after all others) come on the last pages.
func testPagingWhileWriting(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	for i := 1; i <= 20; i++ {
		h.create(Bob, "WEB", fmt.Sprint("item ", i))
	}
	del := func(key string) {
		t.Helper()
		if err := h.svc.DeleteItem(ctx, Bob, key, nil); err != nil {
			t.Fatal(err)
		}
	}
	pages := h.walk(Vic, "WEB", tracker.ItemFilter{}, 5, func(page int) {
		switch page {
		case 1: // listed 1–5
			del("WEB-3")  // listed already
			del("WEB-8")  // on the next page
			del("WEB-20") // on the last page
			h.create(Bob, "WEB", "new 21")
			if _, err := h.svc.UpdateItem(ctx, Bob, "WEB-12", tracker.ItemPatch{Title: ptr("renamed")}, nil); err != nil {
				t.Fatal(err)
			}
		case 2: // listed 6, 7, 9, 10, 11
			del("WEB-11")
			del("WEB-12")
			h.create(Bob, "WEB", "new 22")
		}
	})
	want := webKeys(append(append(span(1, 7), 9, 10, 11), span(13, 19)...)...)
	want = append(want, "WEB-21", "WEB-22")
	if keys := keysOf(pages); !slices.Equal(keys, want) {
		t.Fatalf("listed %v, want %v", keys, want)
	}
}

// testPagedRecipe follows the client recipe across pages at the store: the snapshot is
// loaded a few items at a time while items are created, changed (two events in one write),
// given dependencies and deleted between the pages; the first page's seq and the events
// after it, applied idempotently, give exactly the state a fresh listing shows.
func testPagedRecipe(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	for i := 1; i <= 24; i++ {
		h.create(Bob, "WEB", fmt.Sprint("item ", i))
	}
	h.dep("WEB-2", "WEB-1")
	subscribed := h.head() // step 1: the subscription's seq
	rng := rand.New(rand.NewPCG(5, 8))
	pages := h.walk(Vic, "WEB", tracker.ItemFilter{}, 4, func(page int) {
		var err error
		switch page {
		case 1:
			// Both events of the write at one version, on an item a later page reads.
			_, err = h.svc.UpdateItem(ctx, Bob, "WEB-9", tracker.ItemPatch{Title: ptr("renamed"), State: ptr(tracker.StateReady)}, nil)
		case 2:
			_, _, err = h.svc.AddDependency(ctx, Bob, "WEB-12", "WEB-3") // a listed item blocks one ahead
		case 3:
			err = h.svc.DeleteItem(ctx, Bob, "WEB-14", nil) // ahead, with an update before it
		}
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := randomWrite(ctx, h.svc, rng, "WEB", Bob); err != nil {
				t.Fatal(err)
			}
		}
	})
	if len(pages) < 6 || pages[0].Seq < subscribed {
		t.Fatalf("%d pages, the first at seq %d (subscribed at %d)", len(pages), pages[0].Seq, subscribed)
	}
	r := NewPagedReplica(pages)
	evs, err := h.log.ReadStream(ctx, streams.Stream{Kind: streams.StreamProject, Key: "WEB"}, subscribed, h.head(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := r.Apply(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	items, seq, err := listAll(ctx, h.svc, Vic, "WEB", tracker.ItemFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != seq {
		t.Fatalf("replica at seq %d, the listing at %d", r.Seq, seq)
	}
	if diff := r.Diff(items); diff != "" {
		t.Fatalf("the pages and the events after the first page's seq do not give the server's state:\n%s", diff)
	}
}
