package trackertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

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
			items, seq, err := listAll(ctx, h.svc, Vic, "WEB", tracker.ItemFilter{})
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
	items, seq, err := listAll(ctx, h.svc, Vic, "WEB", tracker.ItemFilter{})
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
	items, _, err := listAll(ctx, svc, a, project, tracker.ItemFilter{})
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
		key, blocker := pick(), pick()
		_, _, err = svc.AddDependency(ctx, a, key, blocker)
		if key == blocker && errors.Is(err, tracker.ErrInvalid) {
			return nil // an item cannot block itself
		}
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
