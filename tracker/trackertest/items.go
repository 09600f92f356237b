package trackertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/tracker"
)

func testCreate(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	h.project("API", Alice)
	start := h.head()
	t0 := time.Now().Add(-time.Second)
	a := h.create(Bob, "WEB", "First")
	if a.Key != "WEB-1" || a.Project != "WEB" || a.Number != 1 || a.Title != "First" || a.Description != "" ||
		a.State != tracker.StateBacklog || a.Version != 1 || len(a.BlockedBy) != 0 || a.BlockedBy == nil {
		t.Fatalf("created %+v", a)
	}
	if !uuidV7.MatchString(a.ID) {
		t.Fatalf("id %q is not a UUIDv7", a.ID)
	}
	if a.CreatedAt.Before(t0) || !a.CreatedAt.Equal(a.UpdatedAt) {
		t.Fatalf("times %v %v", a.CreatedAt, a.UpdatedAt)
	}
	evs := h.wantEvents(start, Bob, "item.created")
	wantItemEvent(t, &evs[0], a)
	aj, _ := json.Marshal(a)
	wantPayload(t, &evs[0], string(aj))
	if got := h.get("WEB-1"); !reflectEqual(got, a) {
		t.Fatalf("get %+v, created %+v", got, a)
	}

	b, err := h.svc.CreateItem(ctx, Agent, "WEB", tracker.ItemInput{Title: "Second", Description: "d", State: tracker.StateReady})
	if err != nil {
		t.Fatal(err)
	}
	if b.Key != "WEB-2" || b.State != "ready" || b.Description != "d" || b.ID <= a.ID {
		t.Fatalf("second %+v (first id %s)", b, a.ID)
	}
	evs = h.eventsAfter(h.head() - 1)
	if evs[0].ActorKind != "agent" || evs[0].ActorSubject != "bob" {
		t.Fatalf("agent's event actor (%s, %s)", evs[0].ActorKind, evs[0].ActorSubject)
	}
	// Numbers are per project and never reused.
	if c := h.create(Alice, "API", "Other"); c.Key != "API-1" {
		t.Fatalf("first of API is %s", c.Key)
	}
	c := h.create(Bob, "WEB", "Third")
	if err := h.svc.DeleteItem(ctx, Bob, c.Key, nil); err != nil {
		t.Fatal(err)
	}
	if d := h.create(Bob, "WEB", "Fourth"); d.Key != "WEB-4" {
		t.Fatalf("after deleting WEB-3, created %s", d.Key)
	}
	items, seq, err := listAll(ctx, h.svc, Vic, "WEB", tracker.ItemFilter{})
	if err != nil || seq != h.head() {
		t.Fatalf("list: seq %d (head %d), %v", seq, h.head(), err)
	}
	var keys []string
	for _, it := range items {
		keys = append(keys, it.Key)
	}
	if !slices.Equal(keys, []string{"WEB-1", "WEB-2", "WEB-4"}) {
		t.Fatalf("items %v", keys)
	}
	for _, k := range []string{"WEB-3", "WEB-99", "API-2", "NOPE-1", "WEB-0", "WEB-01", "web-1", "WEB", "WEB-", "-1", "WEB-1-2"} {
		if _, err := h.svc.GetItem(ctx, Root, k); !errors.Is(err, tracker.ErrNotFound) && !errors.Is(err, tracker.ErrForbidden) {
			t.Fatalf("get %s: %v", k, err)
		}
		if ok, err := h.svc.ItemExists(ctx, k); ok || err != nil {
			t.Fatalf("ItemExists(%s) = %v, %v", k, ok, err)
		}
	}
	if ok, err := h.svc.ItemExists(ctx, "WEB-4"); !ok || err != nil {
		t.Fatalf("ItemExists(WEB-4) = %v, %v", ok, err)
	}
}

func reflectEqual(a, b *tracker.Item) bool {
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return string(aj) == string(bj) && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}

func testUpdate(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	a := h.create(Bob, "WEB", "Title")

	start := h.head()
	u, err := h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{Title: ptr("New title")}, nil)
	if err != nil || u.Version != 2 || u.Title != "New title" || !u.UpdatedAt.After(a.UpdatedAt) && !u.UpdatedAt.Equal(a.UpdatedAt) {
		t.Fatalf("update %+v %v", u, err)
	}
	evs := h.wantEvents(start, Bob, "item.updated")
	wantItemEvent(t, &evs[0], u)
	wantPayload(t, &evs[0], `{"title":{"from":"Title","to":"New title"},"version":2}`)

	start = h.head()
	u, err = h.svc.UpdateItem(ctx, Bot, a.Key, tracker.ItemPatch{Title: ptr("T3"), Description: ptr("D"), State: ptr("in_progress")}, ptr(int64(2)))
	if err != nil || u.Version != 3 || u.State != "in_progress" || u.Description != "D" {
		t.Fatalf("update %+v %v", u, err)
	}
	evs = h.wantEvents(start, Bot, "item.updated", "item.state_changed")
	wantPayload(t, &evs[0], `{"title":{"from":"New title","to":"T3"},"description":{"from":"","to":"D"},"version":3}`)
	wantPayload(t, &evs[1], `{"from":"backlog","to":"in_progress","version":3}`)
	wantItemEvent(t, &evs[0], u)
	wantItemEvent(t, &evs[1], u)

	start = h.head()
	u, err = h.svc.UpdateItem(ctx, Agent, a.Key, tracker.ItemPatch{State: ptr("done"), Title: ptr("T3")}, nil)
	if err != nil || u.Version != 4 || u.State != "done" {
		t.Fatalf("update %+v %v", u, err)
	}
	evs = h.wantEvents(start, Agent, "item.state_changed")
	wantPayload(t, &evs[0], `{"from":"in_progress","to":"done","version":4}`)

	// A patch that changes nothing is no change: no version, no event.
	start = h.head()
	u, err = h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{State: ptr("done"), Description: ptr("D")}, ptr(int64(4)))
	if err != nil || u.Version != 4 {
		t.Fatalf("no-op update %+v %v", u, err)
	}
	u, err = h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{}, nil)
	if err != nil || u.Version != 4 {
		t.Fatalf("empty update %+v %v", u, err)
	}
	h.wantEvents(start, Bob)
	if got := h.get(a.Key); !reflectEqual(got, u) {
		t.Fatalf("get %+v, updated %+v", got, u)
	}
	// Empty description is a change too.
	u, err = h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{Description: ptr("")}, nil)
	if err != nil || u.Version != 5 || u.Description != "" {
		t.Fatalf("clear description %+v %v", u, err)
	}
}

func testPreconditions(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	a := h.create(Bob, "WEB", "Title")
	if _, err := h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{Title: ptr("v2")}, ptr(int64(1))); err != nil {
		t.Fatal(err)
	}
	before := h.head()
	_, err := h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{Title: ptr("stale")}, ptr(int64(1)))
	h.wantErr("stale update", before, err, tracker.ErrPrecondition)
	_, err = h.svc.UpdateItem(ctx, Bob, a.Key, tracker.ItemPatch{}, ptr(int64(3)))
	h.wantErr("future version", before, err, tracker.ErrPrecondition)
	err = h.svc.DeleteItem(ctx, Bob, a.Key, ptr(int64(1)))
	h.wantErr("stale delete", before, err, tracker.ErrPrecondition)
	_, err = h.svc.UpdateItem(ctx, Bob, "WEB-9", tracker.ItemPatch{Title: ptr("x")}, ptr(int64(1)))
	h.wantErr("update of a missing item", before, err, tracker.ErrNotFound)
	if got := h.get(a.Key); got.Title != "v2" || got.Version != 2 {
		t.Fatalf("after failed writes %+v", got)
	}
	start := h.head()
	if err := h.svc.DeleteItem(ctx, Bob, a.Key, ptr(int64(2))); err != nil {
		t.Fatal(err)
	}
	evs := h.wantEvents(start, Bob, "item.deleted")
	wantPayload(t, &evs[0], fmt.Sprintf(`{"key":"WEB-1","id":%q,"version":2}`, a.ID))
	if evs[0].EntityKey != "WEB-1" || evs[0].EntityID != a.ID {
		t.Fatalf("deleted event %+v", evs[0])
	}
	before = h.head()
	err = h.svc.DeleteItem(ctx, Bob, a.Key, nil)
	h.wantErr("delete twice", before, err, tracker.ErrNotFound)
}

func testValidation(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	a := h.create(Bob, "WEB", "A")
	before := h.head()
	bad := []tracker.ItemInput{
		{Title: ""}, {Title: "   \t"}, {Title: strings.Repeat("x", 201)}, {Title: "a\x00b"}, {Title: "\xff"},
		{Title: "t", Description: strings.Repeat("é", 32<<10) + "x"}, {Title: "t", Description: strings.Repeat("😀", 16<<10+1)},
		{Title: "t", State: "open"}, {Title: "t", State: "Done"},
	}
	for _, in := range bad {
		_, err := h.svc.CreateItem(ctx, Bob, "WEB", in)
		h.wantErr(fmt.Sprintf("create %.20q/%d/%q", in.Title, len(in.Description), in.State), before, err, tracker.ErrInvalid)
	}
	patches := []tracker.ItemPatch{
		{Title: ptr("")}, {Title: ptr(strings.Repeat("é", 201))}, {Description: ptr(strings.Repeat("x", 64<<10+1))},
		{State: ptr("")}, {State: ptr("closed")}, {Title: ptr("ok"), State: ptr("nope")},
	}
	for i, p := range patches {
		_, err := h.svc.UpdateItem(ctx, Bob, a.Key, p, nil)
		h.wantErr(fmt.Sprint("patch ", i), before, err, tracker.ErrInvalid)
	}
	_, _, err := listAll(ctx, h.svc, Bob, "WEB", tracker.ItemFilter{State: "closed"})
	h.wantErr("filter by a bad state", before, err, tracker.ErrInvalid)
	// Titles are bounded in characters, descriptions in bytes.
	ok, err := h.svc.CreateItem(ctx, Bob, "WEB", tracker.ItemInput{Title: strings.Repeat("é", 200), Description: strings.Repeat("😀", 16<<10)})
	if err != nil {
		t.Fatalf("longest title and description: %v", err)
	}
	if got := h.get(ok.Key); got.Title != ok.Title || got.Description != ok.Description {
		t.Fatal("long text did not round-trip")
	}
	long := strings.Repeat("d", tracker.DefaultMaxDescriptionBytes)
	if _, err := h.svc.UpdateItem(ctx, Bob, ok.Key, tracker.ItemPatch{Description: &long}, nil); err != nil {
		t.Fatalf("a description of the longest: %v", err)
	}
	var te *fault.Error
	_, err = h.svc.UpdateItem(ctx, Bob, ok.Key, tracker.ItemPatch{Description: ptr(long + "d")}, nil)
	if !errors.As(err, &te) || te.Limit != tracker.LimitDescriptionBytes || te.Max != 64<<10 || te.Detail != "description: longer than 65536 bytes" {
		t.Fatalf("a description of one byte more: %#v", err)
	}
}

func testFilters(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	h.create(Bob, "WEB", "Login page")
	if _, err := h.svc.CreateItem(ctx, Bob, "WEB", tracker.ItemInput{Title: "Signup", Description: "after the LOGIN works", State: "ready"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.CreateItem(ctx, Bob, "WEB", tracker.ItemInput{Title: "Logout", State: "ready"}); err != nil {
		t.Fatal(err)
	}
	h.create(Bob, "WEB", "100% done_ish")
	for _, c := range []struct {
		f    tracker.ItemFilter
		want []string
	}{
		{tracker.ItemFilter{}, []string{"WEB-1", "WEB-2", "WEB-3", "WEB-4"}},
		{tracker.ItemFilter{State: "ready"}, []string{"WEB-2", "WEB-3"}},
		{tracker.ItemFilter{Query: "login"}, []string{"WEB-1", "WEB-2"}},
		{tracker.ItemFilter{Query: "LOG", State: "ready"}, []string{"WEB-2", "WEB-3"}},
		{tracker.ItemFilter{Query: "%"}, []string{"WEB-4"}},
		{tracker.ItemFilter{Query: "_"}, []string{"WEB-4"}},
		{tracker.ItemFilter{State: "done"}, nil},
	} {
		items, _, err := listAll(ctx, h.svc, Vic, "WEB", c.f)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, it := range items {
			keys = append(keys, it.Key)
		}
		if !slices.Equal(keys, c.want) || items == nil {
			t.Fatalf("filter %+v: %v, want %v", c.f, keys, c.want)
		}
	}
}
