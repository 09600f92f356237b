package plannertest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/tracker"
)

func (e *suite) running(t *testing.T, id string) bool {
	t.Helper()
	s, err := e.Store.Session(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return s.Running
}

// renew1 renews one lease, as Renew of that lease alone.
func (e *suite) renew1(t *testing.T, session, owner string, ttl time.Duration) (held, cancel bool, err error) {
	t.Helper()
	rs, err := e.Store.Renew(e.ctx, []planner.Lease{{Session: session, Owner: owner}}, ttl)
	if err != nil {
		return false, false, err
	}
	if len(rs) != 1 {
		t.Fatalf("Renew of one lease returned %d renewals", len(rs))
	}
	return rs[0].Held, rs[0].Cancel, nil
}

func testLeases(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "", time.Now())
	if e.running(t, s.ID) {
		t.Fatal("running before any lease")
	}
	taken, stale, err := e.Store.Acquire(e.ctx, s.ID, "a/1", "alice", 0, time.Minute, planner.TraceContext{})
	if err != nil || !taken || stale {
		t.Fatalf("first acquire: %v %v %v", taken, stale, err)
	}
	if !e.running(t, s.ID) {
		t.Fatal("not running while leased")
	}
	if list, _ := e.Store.Sessions(e.ctx, "WEB", planner.SessionPage{}); len(list.Sessions) != 1 || !list.Sessions[0].Running {
		t.Fatalf("sessions while leased: %+v", list)
	}
	if taken, _, err := e.Store.Acquire(e.ctx, s.ID, "b/1", "alice", 0, time.Minute, planner.TraceContext{}); err != nil || taken {
		t.Fatalf("second owner acquired a held lease: %v %v", taken, err)
	}
	if taken, _, err := e.Store.Acquire(e.ctx, s.ID, "a/1", "alice", 0, time.Minute, planner.TraceContext{}); err != nil || taken {
		t.Fatalf("the owner acquired its held lease again: %v %v", taken, err)
	}
	if ok, cancel, err := e.renew1(t, s.ID, "a/1", time.Minute); err != nil || !ok || cancel {
		t.Fatalf("owner renew: %v %v %v", ok, cancel, err)
	}
	if ok, _, err := e.renew1(t, s.ID, "b/1", time.Minute); err != nil || ok {
		t.Fatalf("stranger renew: %v %v", ok, err)
	}
	// A cancel request is read by the owner's next renewal.
	if err := e.Store.RequestCancel(e.ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if ok, cancel, err := e.renew1(t, s.ID, "a/1", time.Minute); err != nil || !ok || !cancel {
		t.Fatalf("renew after a cancel request: %v %v %v", ok, cancel, err)
	}
	if sess, err := e.Store.Session(e.ctx, s.ID); err != nil || !sess.Running || sess.Turn != "1" {
		t.Fatalf("session while leased: %+v %v, want running turn 1", sess, err)
	}
	if err := e.Store.Release(e.ctx, s.ID, "b/1"); err != nil {
		t.Fatal(err)
	}
	if !e.running(t, s.ID) {
		t.Fatal("a stranger's release freed the session")
	}
	if ls, err := e.Store.Expired(e.ctx, []string{s.ID}); err != nil || len(ls) != 0 {
		t.Fatalf("expired leases of a fresh lease: %+v, %v", ls, err)
	}
	if err := e.Store.Release(e.ctx, s.ID, "a/1"); err != nil {
		t.Fatal(err)
	}
	if e.running(t, s.ID) {
		t.Fatal("running after release")
	}
	if ok, _, _ := e.renew1(t, s.ID, "a/1", time.Minute); ok {
		t.Fatal("renewed a released lease")
	}
	if taken, stale, err := e.Store.Acquire(e.ctx, s.ID, "b/1", "alice", 0, time.Minute, planner.TraceContext{}); err != nil || !taken || stale {
		t.Fatalf("acquire after release: %v %v %v", taken, stale, err)
	}
	if ok, cancel, err := e.renew1(t, s.ID, "b/1", time.Minute); err != nil || !ok || cancel {
		t.Fatalf("a new lease carries the old one's cancel request: %v %v %v", ok, cancel, err)
	}
	if _, _, err := e.Store.Acquire(e.ctx, tracker.NewID(time.Now()), "a/1", "alice", 0, time.Minute, planner.TraceContext{}); !errors.Is(err, planner.ErrNotFound) {
		t.Fatalf("lease of an unknown session: %v, want ErrNotFound", err)
	}
}

// testTurnsPerSubject: a subject's unexpired leases bound its next, whoever holds the others,
// and concurrent acquires of one subject never go beyond the bound.
func testTurnsPerSubject(t *testing.T, e *suite) {
	var ids []string
	for range 8 {
		ids = append(ids, e.session(t, "WEB", "", time.Now()).ID)
	}
	const ttl = 150 * time.Millisecond
	acquire := func(id, owner, subject string, d time.Duration) (bool, error) {
		t.Helper()
		taken, _, err := e.Store.Acquire(e.ctx, id, owner, subject, 2, d, planner.TraceContext{})
		return taken, err
	}
	wantLimit := func(what string, err error) {
		t.Helper()
		var le *fault.Error
		if !errors.As(err, &le) || !errors.Is(err, planner.ErrLimit) || le.Limit != planner.LimitTurns || le.Max != 2 {
			t.Fatalf("%s: %v, want the %s limit of 2", what, err, planner.LimitTurns)
		}
	}
	if taken, err := acquire(ids[0], "a/1", "alice", time.Minute); err != nil || !taken {
		t.Fatalf("alice's first: %v %v", taken, err)
	}
	if taken, err := acquire(ids[1], "a/2", "alice", ttl); err != nil || !taken {
		t.Fatalf("alice's second: %v %v", taken, err)
	}
	_, err := acquire(ids[2], "a/3", "alice", time.Minute)
	wantLimit("alice's third", err)
	if e.running(t, ids[2]) {
		t.Fatal("a refused lease was taken")
	}
	if taken, err := acquire(ids[2], "b/1", "bob", time.Minute); err != nil || !taken {
		t.Fatalf("bob's first, beside alice's two: %v %v", taken, err)
	}
	// Her own session's lease does not count against it: busy, not beyond the limit.
	if taken, err := acquire(ids[0], "a/4", "alice", time.Minute); err != nil || taken {
		t.Fatalf("alice again on her running session: %v %v", taken, err)
	}
	// An expired lease counts for no one.
	deadline := time.Now().Add(30 * time.Second)
	for {
		taken, err := acquire(ids[3], "a/5", "alice", time.Minute)
		if err == nil && taken {
			break
		}
		if !errors.Is(err, planner.ErrLimit) || time.Now().After(deadline) {
			t.Fatalf("alice after her short lease expired: %v %v", taken, err)
		}
		time.Sleep(ttl / 2)
	}
	// A released lease neither.
	if err := e.Store.Release(e.ctx, ids[0], "a/1"); err != nil {
		t.Fatal(err)
	}
	if taken, err := acquire(ids[4], "a/6", "alice", time.Minute); err != nil || !taken {
		t.Fatalf("alice after a release: %v %v", taken, err)
	}
	for _, l := range []struct{ id, owner string }{{ids[2], "b/1"}, {ids[3], "a/5"}, {ids[4], "a/6"}} {
		if err := e.Store.Release(e.ctx, l.id, l.owner); err != nil {
			t.Fatal(err)
		}
	}
	// Concurrent acquires of one subject on free sessions: exactly the limit wins.
	var wg sync.WaitGroup
	var wins, refused atomic.Int32
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			taken, _, err := e.Store.Acquire(e.ctx, id, fmt.Sprint("racer/", i), "carol", 2, time.Minute, planner.TraceContext{})
			switch {
			case errors.Is(err, planner.ErrLimit):
				refused.Add(1)
			case err != nil:
				t.Error(err)
			case taken:
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 2 || refused.Load() != int32(len(ids))-2 {
		t.Fatalf("%d of carol's concurrent acquires won and %d were refused, want 2 and %d", wins.Load(), refused.Load(), len(ids)-2)
	}
}

func testLeaseExpiry(t *testing.T, e *suite) {
	s := e.session(t, "WEB", "", time.Now())
	other := e.session(t, "WEB", "", time.Now())
	const ttl = 150 * time.Millisecond
	// The trace context of the send is kept, for the replica that ends a dead turn.
	tc := planner.TraceContext{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", State: "vendor=opaque"}
	if taken, _, err := e.Store.Acquire(e.ctx, s.ID, "dead/1", "alice", 0, ttl, tc); err != nil || !taken {
		t.Fatalf("acquire: %v %v", taken, err)
	}
	if taken, _, err := e.Store.Acquire(e.ctx, other.ID, "alive/1", "alice", 0, time.Minute, planner.TraceContext{}); err != nil || !taken {
		t.Fatalf("acquire: %v %v", taken, err)
	}
	var expired []planner.Lease
	deadline := time.Now().Add(30 * time.Second)
	for len(expired) == 0 && time.Now().Before(deadline) {
		time.Sleep(ttl / 2)
		var err error
		if expired, err = e.Store.Expired(e.ctx, []string{s.ID, other.ID, "junk"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(expired) != 1 || expired[0].Session != s.ID || expired[0].Owner != "dead/1" || expired[0].Trace != tc {
		t.Fatalf("expired leases %+v, want the dead one only", expired)
	}
	if e.running(t, s.ID) {
		t.Fatal("running with an expired lease")
	}
	live := planner.Lease{Session: other.ID, Owner: "alive/1", ExpiresAt: expired[0].ExpiresAt}
	if got, err := e.Store.ReleaseExpired(e.ctx, []planner.Lease{live}); err != nil || len(got) != 0 {
		t.Fatalf("released a live lease: %+v %v", got, err)
	}

	// Several replicas notice the expired lease at once: exactly one removes it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := e.Store.ReleaseExpired(e.ctx, []planner.Lease{live, expired[0]})
			if err != nil {
				t.Error(err)
			}
			if len(got) > 1 || len(got) == 1 && got[0] != expired[0] {
				t.Errorf("released %+v, want the expired lease alone", got)
			}
			if len(got) == 1 {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d replicas released the expired lease, want 1", wins)
	}
	if taken, stale, err := e.Store.Acquire(e.ctx, s.ID, "next/1", "alice", 0, time.Minute, planner.TraceContext{}); err != nil || !taken || stale {
		t.Fatalf("acquire after the takeover: %v %v %v", taken, stale, err)
	}

	// A Send that finds an expired lease replaces it and learns it was stale.
	if err := e.Store.Release(e.ctx, s.ID, "next/1"); err != nil {
		t.Fatal(err)
	}
	if taken, _, err := e.Store.Acquire(e.ctx, s.ID, "dead/2", "alice", 0, ttl, planner.TraceContext{}); err != nil || !taken {
		t.Fatalf("acquire: %v %v", taken, err)
	}
	time.Sleep(2 * ttl)
	taken, stale, err := e.Store.Acquire(e.ctx, s.ID, "next/2", "alice", 0, time.Minute, planner.TraceContext{})
	if err != nil || !taken || !stale {
		t.Fatalf("acquire over an expired lease: taken %v stale %v %v; want both", taken, stale, err)
	}
	if ok, _, _ := e.renew1(t, s.ID, "dead/2", time.Minute); ok {
		t.Fatal("the dead owner renewed a lease taken over")
	}
	// Concurrent acquires of a free session: exactly one wins.
	if err := e.Store.Release(e.ctx, s.ID, "next/2"); err != nil {
		t.Fatal(err)
	}
	wins = 0
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			taken, _, err := e.Store.Acquire(e.ctx, s.ID, fmt.Sprint("racer/", i), "alice", 0, time.Minute, planner.TraceContext{})
			if err != nil {
				t.Error(err)
			}
			if taken {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d concurrent acquires won, want 1", wins)
	}
}

// testLeaseBatches: Renew and ReleaseExpired take many leases at once and answer for each,
// in order, whatever the others are; concurrent renewals and releases of the same leases,
// each given them in another order, all complete.
func testLeaseBatches(t *testing.T, e *suite) {
	var ids []string
	for range 5 {
		ids = append(ids, e.session(t, "WEB", "", time.Now()).ID)
	}
	for i, owner := range []string{"r/1", "r/2", "other/3", "r/4"} {
		if taken, _, err := e.Store.Acquire(e.ctx, ids[i], owner, "alice", 0, time.Minute, planner.TraceContext{}); err != nil || !taken {
			t.Fatalf("acquire %d: %v %v", i, taken, err)
		}
	}
	if err := e.Store.RequestCancel(e.ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	leases := []planner.Lease{{Session: ids[3], Owner: "r/4"}, {Session: ids[0], Owner: "r/1"}, {Session: "junk", Owner: "r/9"},
		{Session: ids[2], Owner: "r/3"}, {Session: ids[1], Owner: "r/2"}, {Session: ids[4], Owner: "r/5"}}
	rs, err := e.Store.Renew(e.ctx, leases, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []planner.Renewal{{Held: true}, {Held: true}, {}, {}, {Held: true, Cancel: true}, {}}
	if !slices.Equal(rs, want) {
		t.Fatalf("renewals %+v, want %+v", rs, want)
	}
	if rs, err := e.Store.Renew(e.ctx, nil, time.Minute); err != nil || len(rs) != 0 {
		t.Fatalf("renewal of no lease: %+v %v", rs, err)
	}

	// Expired leases, released at once by replicas that found them in different orders, and
	// renewed meanwhile by their owner: each is released once at most, and none renewed first.
	const ttl = 150 * time.Millisecond
	var mine []planner.Lease
	for i, id := range ids {
		if err := e.Store.Release(e.ctx, id, []string{"r/1", "r/2", "other/3", "r/4", ""}[i]); err != nil {
			t.Fatal(err)
		}
		owner := fmt.Sprint("slow/", i)
		if taken, _, err := e.Store.Acquire(e.ctx, id, owner, "alice", 0, ttl, planner.TraceContext{}); err != nil || !taken {
			t.Fatalf("acquire %d: %v %v", i, taken, err)
		}
		mine = append(mine, planner.Lease{Session: id, Owner: owner})
	}
	time.Sleep(2 * ttl)
	expired, err := e.Store.Expired(e.ctx, ids)
	if err != nil || len(expired) != len(ids) {
		t.Fatalf("expired leases %+v %v, want %d", expired, err, len(ids))
	}
	var wg sync.WaitGroup
	var released atomic.Int32
	renewed := make(chan []planner.Renewal, 1)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls := slices.Clone(expired)
			if i%2 == 1 {
				slices.Reverse(ls)
			}
			got, err := e.Store.ReleaseExpired(e.ctx, ls)
			if err != nil {
				t.Error(err)
			}
			released.Add(int32(len(got)))
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rs, err := e.Store.Renew(e.ctx, mine, time.Minute)
		if err != nil {
			t.Error(err)
		}
		renewed <- rs
	}()
	wg.Wait()
	held := 0
	for _, r := range <-renewed {
		if r.Held {
			held++
		}
	}
	if int(released.Load())+held != len(ids) {
		t.Fatalf("%d leases released and %d renewed, want %d in all", released.Load(), held, len(ids))
	}
	left, err := e.Store.Expired(e.ctx, ids)
	if err != nil || len(left) != 0 {
		t.Fatalf("expired leases left: %+v %v", left, err)
	}
}
