package trackertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ballet/gateway/tracker"
)

func testDependencies(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	h.project("API", Alice)
	if _, err := h.svc.SetMember(ctx, Alice, "API", "bob", "member"); err != nil {
		t.Fatal(err)
	}
	a, b, c := h.create(Bob, "WEB", "A"), h.create(Bob, "WEB", "B"), h.create(Bob, "WEB", "C")
	other := h.create(Bob, "API", "Other")

	start := h.head()
	got := h.dep(a.Key, c.Key) // C blocks A
	if got.Version != 2 || !slices.Equal(got.BlockedBy, []string{"WEB-3"}) {
		t.Fatalf("after C blocks A: %+v", got)
	}
	evs := h.wantEvents(start, Bob, "dependency.added")
	wantPayload(t, &evs[0], `{"blocker":"WEB-3","blocked":"WEB-1","version":2}`)
	wantItemEvent(t, &evs[0], got)
	got = h.dep(a.Key, b.Key)
	if got.Version != 3 || !slices.Equal(got.BlockedBy, []string{"WEB-2", "WEB-3"}) {
		t.Fatalf("blocked_by not by number: %+v", got)
	}
	if g := h.get(b.Key); g.Version != 1 || len(g.BlockedBy) != 0 {
		t.Fatalf("the blocker changed: %+v", g)
	}

	// Idempotent: no event, no version.
	before := h.head()
	again, added, err := h.svc.AddDependency(ctx, Bob, a.Key, b.Key)
	if err != nil || added || again.Version != 3 {
		t.Fatalf("again: %+v %v %v", again, added, err)
	}
	if h.head() != before {
		t.Fatal("an existing dependency appended events")
	}
	_, _, err = h.svc.AddDependency(ctx, Bob, a.Key, a.Key)
	h.wantErr("self dependency", before, err, tracker.ErrInvalid)
	_, _, err = h.svc.AddDependency(ctx, Bob, a.Key, other.Key)
	h.wantErr("cross-project dependency", before, err, tracker.ErrInvalid)
	_, _, err = h.svc.AddDependency(ctx, Bob, a.Key, "API-99")
	h.wantErr("cross-project dependency on a missing item", before, err, tracker.ErrInvalid)
	_, _, err = h.svc.AddDependency(ctx, Bob, a.Key, "WEB-99")
	h.wantErr("missing blocker", before, err, tracker.ErrNotFound)
	_, _, err = h.svc.AddDependency(ctx, Bob, "WEB-99", a.Key)
	h.wantErr("missing blocked item", before, err, tracker.ErrNotFound)
	_, _, err = h.svc.AddDependency(ctx, Bob, a.Key, "nonsense")
	h.wantErr("malformed blocker", before, err, tracker.ErrNotFound)
	_, _, err = h.svc.AddDependency(ctx, Vic, a.Key, b.Key)
	h.wantErr("dependency by a viewer", before, err, tracker.ErrForbidden)
	_, err = h.svc.RemoveDependency(ctx, Bob, b.Key, a.Key)
	h.wantErr("remove a missing dependency", before, err, tracker.ErrNotFound)
	_, err = h.svc.RemoveDependency(ctx, Bob, a.Key, "WEB-99")
	h.wantErr("remove a dependency on a missing item", before, err, tracker.ErrNotFound)

	start = h.head()
	got, err = h.svc.RemoveDependency(ctx, Agent, a.Key, c.Key)
	if err != nil || got.Version != 4 || !slices.Equal(got.BlockedBy, []string{"WEB-2"}) {
		t.Fatalf("remove: %+v %v", got, err)
	}
	evs = h.wantEvents(start, Agent, "dependency.removed")
	wantPayload(t, &evs[0], `{"blocker":"WEB-3","blocked":"WEB-1","version":4}`)
	wantItemEvent(t, &evs[0], got)
	before = h.head()
	_, err = h.svc.RemoveDependency(ctx, Bob, a.Key, c.Key)
	h.wantErr("remove twice", before, err, tracker.ErrNotFound)
	if g := h.get(a.Key); !reflectEqual(g, got) {
		t.Fatalf("get %+v, want %+v", g, got)
	}
}

func testCycles(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	var k []string
	for i := range 6 {
		k = append(k, h.create(Bob, "WEB", fmt.Sprint("I", i)).Key)
	}
	// A chain k0 blocks k1 blocks ... blocks k4, and k0 blocks k5.
	for i := 0; i < 4; i++ {
		h.dep(k[i+1], k[i])
	}
	h.dep(k[5], k[0])
	before := h.head()
	for _, c := range [][2]string{{k[0], k[1]}, {k[0], k[4]}, {k[2], k[4]}, {k[0], k[5]}} {
		// Making c[1] block c[0] closes a loop: c[0] already blocks c[1], possibly through others.
		_, _, err := h.svc.AddDependency(ctx, Bob, c[0], c[1])
		h.wantErr(fmt.Sprintf("%s blocks %s", c[1], c[0]), before, err, tracker.ErrConflict)
	}
	// Not cycles: a shortcut along the chain, and a branch joining it.
	h.dep(k[4], k[0])
	h.dep(k[5], k[3]) // k3 blocks k5
	h.dep(k[5], k[4]) // k4 blocks k5 as well
	before = h.head()
	// Through the new branch: k1 → k2 → k3 → k5, so k5 cannot block k1.
	_, _, err := h.svc.AddDependency(ctx, Bob, k[1], k[5])
	h.wantErr("long cycle through a branch", before, err, tracker.ErrConflict)
	// Removing a link opens the loop again.
	if _, err := h.svc.RemoveDependency(ctx, Bob, k[3], k[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.RemoveDependency(ctx, Bob, k[5], k[0]); err != nil {
		t.Fatal(err)
	}
	h.dep(k[2], k[5]) // k5 blocks k2: k2 no longer reaches k5
}

func testDeleteCascades(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	a, b, c, d := h.create(Bob, "WEB", "A"), h.create(Bob, "WEB", "B"), h.create(Bob, "WEB", "C"), h.create(Bob, "WEB", "D")
	h.dep(a.Key, c.Key) // C blocks A
	h.dep(b.Key, a.Key) // A blocks B
	h.dep(d.Key, a.Key) // A blocks D
	h.dep(d.Key, c.Key) // C blocks D
	items, seq, err := listAll(ctx, h.svc, Bob, "WEB", tracker.ItemFilter{})
	if err != nil {
		t.Fatal(err)
	}
	replica := NewReplica(items, seq)
	a = h.get(a.Key)

	start := h.head()
	if err := h.svc.DeleteItem(ctx, Alice, a.Key, ptr(a.Version)); err != nil {
		t.Fatal(err)
	}
	evs := h.wantEvents(start, Alice, "dependency.removed", "dependency.removed", "dependency.removed", "item.deleted")
	b, d = h.get(b.Key), h.get(d.Key)
	if b.Version != 3 || len(b.BlockedBy) != 0 || d.Version != 4 || !slices.Equal(d.BlockedBy, []string{"WEB-3"}) {
		t.Fatalf("after the delete: B %+v, D %+v", b, d)
	}
	wantPayload(t, &evs[0], `{"blocker":"WEB-1","blocked":"WEB-2","version":3}`)
	wantItemEvent(t, &evs[0], b)
	wantPayload(t, &evs[1], `{"blocker":"WEB-1","blocked":"WEB-4","version":4}`)
	wantItemEvent(t, &evs[1], d)
	wantPayload(t, &evs[2], fmt.Sprintf(`{"blocker":"WEB-3","blocked":"WEB-1","version":%d}`, a.Version))
	wantPayload(t, &evs[3], fmt.Sprintf(`{"key":"WEB-1","id":%q,"version":%d}`, a.ID, a.Version))
	for _, e := range evs[2:] {
		if e.EntityKey != a.Key || e.EntityID != a.ID {
			t.Fatalf("event %+v is not on the deleted item", e)
		}
	}
	for i := range evs {
		if err := replica.Apply(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	items, _, err = listAll(ctx, h.svc, Bob, "WEB", tracker.ItemFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := replica.Diff(items); diff != "" {
		t.Fatalf("replica after the delete:\n%s", diff)
	}
	// C no longer blocks the deleted item: deleting C touches D only.
	start = h.head()
	if err := h.svc.DeleteItem(ctx, Bob, c.Key, nil); err != nil {
		t.Fatal(err)
	}
	evs = h.wantEvents(start, Bob, "dependency.removed", "item.deleted")
	if evs[0].EntityKey != d.Key {
		t.Fatalf("removed %+v", evs[0])
	}
	if _, err := h.svc.GetItem(ctx, Bob, a.Key); !errors.Is(err, tracker.ErrNotFound) {
		t.Fatalf("deleted item: %v", err)
	}
}
