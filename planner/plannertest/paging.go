package plannertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
)

// walk lists project's sessions page by page, limit at a time, calling between after each
// page but the last, and checks the pages: newest first across pages, full but for the last,
// Next the last session's key when another page follows. It returns the ids in order.
func (e *suite) walk(t *testing.T, project string, limit int, between func(page int)) []string {
	t.Helper()
	var (
		ids  []string
		page = planner.SessionPage{Limit: limit}
		last *planner.SessionKey
	)
	for n := 1; ; n++ {
		list, err := e.Store.Sessions(e.ctx, project, page)
		if err != nil {
			t.Fatalf("page %d: %v", n, err)
		}
		for _, s := range list.Sessions {
			k := s.Key()
			if last != nil && !last.Before(k) || s.Project != project {
				t.Fatalf("page %d: %s (%v) after %+v", n, s.ID, s.CreatedAt, last)
			}
			last = &k
			ids = append(ids, s.ID)
		}
		if list.Next == nil {
			return ids
		}
		if len(list.Sessions) != limit || *list.Next != *last {
			t.Fatalf("page %d: %d sessions of %d, next %+v after %+v", n, len(list.Sessions), limit, list.Next, last)
		}
		if between != nil {
			between(n)
		}
		page.After = list.Next
	}
}

func testSessionPaging(t *testing.T, e *suite) {
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	var all []*planner.Session // oldest first
	for i := range 13 {
		all = append(all, e.session(t, "WEB", fmt.Sprint("s", i), base.Add(time.Duration(i)*time.Second)))
	}
	// Sessions made at the same microsecond are listed by id.
	tie := base.Add(5*time.Second + 500*time.Millisecond)
	for i := range 4 {
		all = append(all, e.session(t, "WEB", fmt.Sprint("tie", i), tie))
	}
	e.session(t, "OPS", "elsewhere", base.Add(time.Minute))
	slices.SortFunc(all, func(a, b *planner.Session) int {
		if a.Key().Before(b.Key()) {
			return -1
		}
		return 1
	})
	var want []string
	for _, s := range all {
		want = append(want, s.ID)
	}
	for _, limit := range []int{1, 4, 16, 17, 500} {
		if got := e.walk(t, "WEB", limit, nil); !slices.Equal(got, want) {
			t.Fatalf("pages of %d:\n%v\nwant\n%v", limit, got, want)
		}
	}
	list, err := e.Store.Sessions(e.ctx, "WEB", planner.SessionPage{})
	if err != nil || len(list.Sessions) != len(want) || list.Next != nil {
		t.Fatalf("the default page: %d sessions, next %v, %v", len(list.Sessions), list.Next, err)
	}
	oldest := all[len(all)-1].Key()
	if list, err := e.Store.Sessions(e.ctx, "WEB", planner.SessionPage{After: &oldest, Limit: 3}); err != nil || len(list.Sessions) != 0 || list.Next != nil {
		t.Fatalf("after the oldest: %+v, %v", list, err)
	}
	for _, p := range []planner.SessionPage{{Limit: 501}, {Limit: -1}, {After: &planner.SessionKey{CreatedAt: base, ID: "WEB-1"}, Limit: 5}} {
		if _, err := e.Store.Sessions(e.ctx, "WEB", p); !errors.Is(err, planner.ErrInvalid) {
			t.Errorf("page %+v: %v, want ErrInvalid", p, err)
		}
	}

	// Sessions created between pages: the listing goes on from where it was, so newer ones
	// (before the cursor) are not listed and none is repeated or skipped; one created with
	// an older time (another replica's clock) comes in its place.
	var (
		older *planner.Session
		newer int
	)
	got := e.walk(t, "WEB", 5, func(page int) {
		e.session(t, "WEB", fmt.Sprint("newer ", page), time.Now())
		newer++
		if page == 1 {
			older = e.session(t, "WEB", "older", base.Add(-time.Second))
		}
	})
	if want := append(slices.Clone(want), older.ID); !slices.Equal(got, want) {
		t.Fatalf("listed while creating:\n%v\nwant\n%v", got, want)
	}
	if got := e.walk(t, "WEB", 500, nil); len(got) != len(want)+1+newer || newer != 3 {
		t.Fatalf("a fresh listing: %d sessions, after %d newer ones", len(got), newer)
	}
}
