package trackertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

func testDeleteCascades(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	a, b, c, d := h.create(Bob, "WEB", "A"), h.create(Bob, "WEB", "B"), h.create(Bob, "WEB", "C"), h.create(Bob, "WEB", "D")
	h.dep(a.Key, c.Key) // C blocks A
	h.dep(b.Key, a.Key) // A blocks B
	h.dep(d.Key, a.Key) // A blocks D
	h.dep(d.Key, c.Key) // C blocks D
	items, seq, err := h.svc.ListItems(ctx, Bob, "WEB", tracker.ItemFilter{})
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
	items, _, err = h.svc.ListItems(ctx, Bob, "WEB", tracker.ItemFilter{})
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

func testPermissions(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	h.project("API", Alice)
	a := h.create(Bob, "WEB", "A")
	b := h.create(Bot, "WEB", "B")
	if _, err := h.svc.GetItem(ctx, Vic, a.Key); err != nil {
		t.Fatalf("viewer reads: %v", err)
	}
	if _, _, err := h.svc.ListItems(ctx, Vic, "WEB", tracker.ItemFilter{}); err != nil {
		t.Fatalf("viewer lists: %v", err)
	}
	before := h.head()
	type op struct {
		name string
		f    func(a tracker.Actor) error
	}
	writes := []op{
		{"create", func(x tracker.Actor) error {
			_, err := h.svc.CreateItem(ctx, x, "WEB", tracker.ItemInput{Title: "t"})
			return err
		}},
		{"update", func(x tracker.Actor) error {
			_, err := h.svc.UpdateItem(ctx, x, a.Key, tracker.ItemPatch{Title: ptr("t")}, nil)
			return err
		}},
		{"delete", func(x tracker.Actor) error { return h.svc.DeleteItem(ctx, x, a.Key, nil) }},
		{"add dependency", func(x tracker.Actor) error {
			_, _, err := h.svc.AddDependency(ctx, x, a.Key, b.Key)
			return err
		}},
		{"remove dependency", func(x tracker.Actor) error {
			_, err := h.svc.RemoveDependency(ctx, x, a.Key, b.Key)
			return err
		}},
	}
	reads := []op{
		{"list", func(x tracker.Actor) error {
			_, _, err := h.svc.ListItems(ctx, x, "WEB", tracker.ItemFilter{})
			return err
		}},
		{"get", func(x tracker.Actor) error {
			_, err := h.svc.GetItem(ctx, x, a.Key)
			return err
		}},
	}
	for _, w := range writes {
		h.wantErr("viewer "+w.name, before, w.f(Vic), tracker.ErrForbidden)
		h.wantErr("stranger "+w.name, before, w.f(Eve), tracker.ErrForbidden)
		// An admin subject manages members everywhere but writes items only with a role.
		h.wantErr("invalid actor "+w.name, before, w.f(tracker.Actor{Kind: "robot", Subject: "bob"}), tracker.ErrInvalid)
	}
	for _, r := range reads {
		h.wantErr("stranger "+r.name, before, r.f(Eve), tracker.ErrForbidden)
		h.wantErr("no subject "+r.name, before, r.f(tracker.Actor{Kind: "human"}), tracker.ErrInvalid)
	}
	// Unknown projects are not found, for everyone.
	_, _, err := h.svc.ListItems(ctx, Eve, "NOPE", tracker.ItemFilter{})
	h.wantErr("list in a missing project", before, err, tracker.ErrNotFound)
	_, err = h.svc.CreateItem(ctx, Bob, "NOPE", tracker.ItemInput{Title: "t"})
	h.wantErr("create in a missing project", before, err, tracker.ErrNotFound)
	_, err = h.svc.GetItem(ctx, Eve, "NOPE-1")
	h.wantErr("get in a missing project", before, err, tracker.ErrNotFound)
	// The role is checked before the item's existence, so strangers learn nothing of items.
	_, err = h.svc.GetItem(ctx, Eve, "WEB-99")
	h.wantErr("stranger gets a missing item", before, err, tracker.ErrForbidden)
	_, err = h.svc.GetItem(ctx, Bob, "API-1")
	h.wantErr("get in another project", before, err, tracker.ErrForbidden)
	// An agent has the permissions of its human: bob is a member.
	if _, err := h.svc.UpdateItem(ctx, Agent, a.Key, tracker.ItemPatch{State: ptr("ready")}, nil); err != nil {
		t.Fatalf("agent for bob: %v", err)
	}
	// Revoking takes effect at once.
	if err := h.svc.RemoveMember(ctx, Alice, "WEB", "bob"); err != nil {
		t.Fatal(err)
	}
	before = h.head()
	_, err = h.svc.GetItem(ctx, Bob, a.Key)
	h.wantErr("revoked member reads", before, err, tracker.ErrForbidden)
	_, err = h.svc.UpdateItem(ctx, Agent, a.Key, tracker.ItemPatch{State: ptr("done")}, nil)
	h.wantErr("agent of a revoked member", before, err, tracker.ErrForbidden)
}

func testValidation(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	a := h.create(Bob, "WEB", "A")
	before := h.head()
	bad := []tracker.ItemInput{
		{Title: ""}, {Title: "   \t"}, {Title: strings.Repeat("x", 201)}, {Title: "a\x00b"}, {Title: "\xff"},
		{Title: "t", Description: strings.Repeat("é", 20001)}, {Title: "t", State: "open"}, {Title: "t", State: "Done"},
	}
	for _, in := range bad {
		_, err := h.svc.CreateItem(ctx, Bob, "WEB", in)
		h.wantErr(fmt.Sprintf("create %.20q/%d/%q", in.Title, len(in.Description), in.State), before, err, tracker.ErrInvalid)
	}
	patches := []tracker.ItemPatch{
		{Title: ptr("")}, {Title: ptr(strings.Repeat("é", 201))}, {Description: ptr(strings.Repeat("x", 20001))},
		{State: ptr("")}, {State: ptr("closed")}, {Title: ptr("ok"), State: ptr("nope")},
	}
	for i, p := range patches {
		_, err := h.svc.UpdateItem(ctx, Bob, a.Key, p, nil)
		h.wantErr(fmt.Sprint("patch ", i), before, err, tracker.ErrInvalid)
	}
	_, _, err := h.svc.ListItems(ctx, Bob, "WEB", tracker.ItemFilter{State: "closed"})
	h.wantErr("filter by a bad state", before, err, tracker.ErrInvalid)
	// The limits are characters, not bytes.
	ok, err := h.svc.CreateItem(ctx, Bob, "WEB", tracker.ItemInput{Title: strings.Repeat("é", 200), Description: strings.Repeat("ü", 20000)})
	if err != nil {
		t.Fatalf("longest title and description: %v", err)
	}
	if got := h.get(ok.Key); got.Title != ok.Title || got.Description != ok.Description {
		t.Fatal("long text did not round-trip")
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
		items, _, err := h.svc.ListItems(ctx, Vic, "WEB", c.f)
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

func testCancelled(t *testing.T, h *harness) {
	h.web()
	a := h.create(Bob, "WEB", "A")
	b := h.create(Bob, "WEB", "B")
	h.dep(a.Key, b.Key)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := h.head()
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s with a cancelled context succeeded", what)
		}
		if h.head() != before {
			t.Fatalf("%s with a cancelled context appended events", what)
		}
	}
	_, err := h.svc.CreateItem(cctx, Bob, "WEB", tracker.ItemInput{Title: "x"})
	check("create", err)
	_, err = h.svc.UpdateItem(cctx, Bob, a.Key, tracker.ItemPatch{Title: ptr("x")}, nil)
	check("update", err)
	check("delete", h.svc.DeleteItem(cctx, Bob, a.Key, nil))
	_, err = h.svc.RemoveDependency(cctx, Bob, a.Key, b.Key)
	check("remove dependency", err)
	_, err = h.svc.SetMember(cctx, Alice, "WEB", "eve", "viewer")
	check("grant", err)
	if c := h.create(Bob, "WEB", "C"); c.Key != "WEB-3" {
		t.Fatalf("after a cancelled create, the next item is %s", c.Key)
	}
	if got := h.get(a.Key); got.Title != "A" || got.Version != 2 || len(got.BlockedBy) != 1 {
		t.Fatalf("after cancelled writes %+v", got)
	}
}

// replay builds a replica of project from the log's events up to seq.
func (h *harness) replay(ctx context.Context, project string, seq int64) (*Replica, error) {
	r := NewReplica(nil, 0)
	evs, err := h.log.ReadStream(ctx, streams.Stream{Kind: streams.StreamProject, Key: project}, 0, seq, 1<<20)
	if err != nil {
		return nil, err
	}
	for i := range evs {
		if err := r.Apply(&evs[i]); err != nil {
			return nil, err
		}
	}
	r.Seq = seq
	return r, nil
}

func testSnapshotConsistency(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	for i := range 4 {
		h.create(Bob, "WEB", fmt.Sprint("seed ", i))
	}
	const writers, ops = 3, 40
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range ops {
				if err := randomWrite(ctx, h.svc, rng, "WEB", Bob); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	snapshots := make(chan struct {
		items []tracker.Item
		seq   int64
	}, 1000)
	var rwg sync.WaitGroup
	rwg.Go(func() {
		defer close(snapshots)
		for {
			items, seq, err := h.svc.ListItems(ctx, Vic, "WEB", tracker.ItemFilter{})
			if err != nil {
				t.Error(err)
				return
			}
			select {
			case snapshots <- struct {
				items []tracker.Item
				seq   int64
			}{items, seq}:
			default:
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	wg.Wait()
	close(done)
	rwg.Wait()
	n := 0
	for s := range snapshots {
		r, err := h.replay(ctx, "WEB", s.seq)
		if err != nil {
			t.Fatalf("replaying up to %d: %v", s.seq, err)
		}
		if diff := r.Diff(s.items); diff != "" {
			t.Fatalf("snapshot at seq %d differs from the log's events up to it:\n%s", s.seq, diff)
		}
		n++
	}
	items, seq, err := h.svc.ListItems(ctx, Vic, "WEB", tracker.ItemFilter{})
	if err != nil || seq != h.head() {
		t.Fatalf("final snapshot seq %d, head %d, %v", seq, h.head(), err)
	}
	r, err := h.replay(ctx, "WEB", seq)
	if err != nil {
		t.Fatal(err)
	}
	if diff := r.Diff(items); diff != "" {
		t.Fatalf("final snapshot differs from the log:\n%s", diff)
	}
	if n == 0 {
		t.Fatal("no snapshot taken during the writes")
	}
}

// RandomWrite makes one random write in project as a through svc: create, patch (with or
// without If-Match), state change, dependency added or removed, or delete. Outcomes that
// concurrent writers cause (not found, conflict, precondition, invalid self dependency) are
// not errors; anything else is.
func RandomWrite(ctx context.Context, svc *tracker.Service, rng *rand.Rand, project string, a tracker.Actor) error {
	return randomWrite(ctx, svc, rng, project, a)
}

func randomWrite(ctx context.Context, svc *tracker.Service, rng *rand.Rand, project string, a tracker.Actor) error {
	items, _, err := svc.ListItems(ctx, a, project, tracker.ItemFilter{})
	if err != nil {
		return err
	}
	pick := func() string {
		if len(items) == 0 {
			return project + "-1"
		}
		return items[rng.IntN(len(items))].Key
	}
	states := []string{tracker.StateBacklog, tracker.StateReady, tracker.StateInProgress, tracker.StateDone}
	switch op := rng.IntN(10); {
	case op < 3 || len(items) < 3:
		_, err = svc.CreateItem(ctx, a, project, tracker.ItemInput{Title: fmt.Sprint("item ", rng.IntN(1000)), Description: fmt.Sprint("d", rng.IntN(10))})
	case op == 3:
		_, err = svc.UpdateItem(ctx, a, pick(), tracker.ItemPatch{Title: ptr(fmt.Sprint("title ", rng.IntN(1000)))}, nil)
	case op == 4:
		it := items[rng.IntN(len(items))]
		_, err = svc.UpdateItem(ctx, a, it.Key, tracker.ItemPatch{Title: ptr(fmt.Sprint("t", rng.IntN(1000))), State: ptr(states[rng.IntN(4)])}, &it.Version)
	case op == 5:
		_, err = svc.UpdateItem(ctx, a, pick(), tracker.ItemPatch{State: ptr(states[rng.IntN(4)]), Description: ptr(fmt.Sprint("d", rng.IntN(10)))}, nil)
	case op < 8:
		_, _, err = svc.AddDependency(ctx, a, pick(), pick())
	case op == 8:
		it := items[rng.IntN(len(items))]
		if len(it.BlockedBy) > 0 {
			_, err = svc.RemoveDependency(ctx, a, it.Key, it.BlockedBy[rng.IntN(len(it.BlockedBy))])
		}
	default:
		if len(items) > 4 {
			err = svc.DeleteItem(ctx, a, pick(), nil)
		}
	}
	for _, ok := range []error{tracker.ErrNotFound, tracker.ErrConflict, tracker.ErrPrecondition} {
		if errors.Is(err, ok) {
			return nil
		}
	}
	if errors.Is(err, tracker.ErrInvalid) && strings.Contains(err.Error(), "itself") {
		return nil
	}
	return err
}

func testConcurrentNumbering(t *testing.T, h *harness) {
	ctx := ctxT(t)
	h.web()
	var (
		mu   sync.Mutex
		keys []string
		wg   sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			for i := range 10 {
				it, err := h.svc.CreateItem(ctx, Bob, "WEB", tracker.ItemInput{Title: fmt.Sprint(w, "/", i)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				keys = append(keys, it.Key)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(keys, byNumber)
	for i, k := range keys {
		if k != tracker.ItemKey("WEB", int64(i+1)) {
			t.Fatalf("keys %v: not 1..40 each once", keys)
		}
	}
}

// testForeignProjects: projects made through the log's own project store (the admin command,
// the development seed) work like the tracker's.
func testForeignProjects(t *testing.T, h *harness) {
	ps, ok := h.log.(streams.ProjectStore)
	if !ok {
		t.Skip("the log keeps no projects")
	}
	ctx := ctxT(t)
	if err := ps.CreateProject(ctx, "OPS", "Operations", "someone"); err != nil {
		t.Fatal(err)
	}
	if err := ps.Grant(ctx, "OPS", "bob", "member", "system", "test"); err != nil {
		t.Fatal(err)
	}
	projects, err := h.svc.Projects(ctx, Bob)
	if err != nil || len(projects) != 1 || projects[0].Key != "OPS" || projects[0].Name != "Operations" || projects[0].Role != "member" {
		t.Fatalf("bob's projects %+v %v", projects, err)
	}
	a, b := h.create(Bob, "OPS", "A"), h.create(Bob, "OPS", "B")
	if a.Key != "OPS-1" || b.Key != "OPS-2" {
		t.Fatalf("keys %s %s", a.Key, b.Key)
	}
	h.dep(a.Key, b.Key)
	if err := h.svc.DeleteItem(ctx, Bob, b.Key, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.get(a.Key); len(got.BlockedBy) != 0 || got.Version != 3 {
		t.Fatalf("after the delete %+v", got)
	}
}
