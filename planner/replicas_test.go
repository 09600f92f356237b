package planner_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/pgstore"
)

// Replicas are Services on one database, each with its own bus connection.

func TestReplicasSeeTheSameOutput(t *testing.T) {
	b := newBackend(t, "postgres")
	a, _ := b.service(t, nil, nil)
	bb, _ := b.service(t, nil, nil)
	id := b.newSession(t, a)
	wa, wb := watch(t, a, alice, id), watch(t, bb, victor, id)

	for i, run := range []*planner.Service{a, bb} {
		if _, err := run.Send(ctxT(t), alice, id, "please plan"); err != nil {
			t.Fatal(err)
		}
		outA, outB := wa.until(t, planner.OutputDone), wb.until(t, planner.OutputDone)
		if !reflect.DeepEqual(outA, outB) {
			t.Fatalf("turn %d: replicas saw different output:\n%s\n--\n%s", i, strings.Join(shape(outA), "\n"), strings.Join(shape(outB), "\n"))
		}
		if got := shape(outA); got[len(got)-1] != "done end_turn" || len(got) < 10 {
			t.Fatalf("turn %d output %v", i, got)
		}
	}
}

func TestReplicasConflictAndCancel(t *testing.T) {
	b := newBackend(t, "postgres")
	a, _ := b.service(t, nil, nil)
	bb, _ := b.service(t, nil, nil)
	id := b.newSession(t, a)
	wa, wb := watch(t, a, alice, id), watch(t, bb, alice, id)
	if _, err := a.Send(ctxT(t), alice, id, "slow"); err != nil {
		t.Fatal(err)
	}
	wb.until(t, planner.OutputText)
	if _, err := bb.Send(ctxT(t), alice, id, "hello"); !errors.Is(err, planner.ErrConflict) {
		t.Fatalf("Send on another replica during a turn: %v, want ErrConflict", err)
	}
	if w := watch(t, bb, alice, id); !w.running {
		t.Fatal("the other replica does not see the running turn")
	}
	if err := bb.Cancel(ctxT(t), alice, id); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*watcher{wa, wb} {
		if got := shape(w.until(t, planner.OutputDone)); got[len(got)-1] != "done cancelled" {
			t.Fatalf("output after a cancel from another replica: %v", got)
		}
	}
	if msgs := transcript(t, a, id); roles(msgs) != "human" {
		t.Fatalf("transcript %s", roles(msgs))
	}
	if _, err := bb.Send(ctxT(t), alice, id, "hello"); err != nil {
		t.Fatalf("Send after the cancel: %v", err)
	}
	if got := shape(wa.until(t, planner.OutputDone)); got[len(got)-1] != "done end_turn" {
		t.Fatalf("output %v", got)
	}
}

func TestReplicaDiesMidTurn(t *testing.T) {
	// Long enough that renewals (every third of it, each with a third of it to answer) keep
	// it on a loaded machine: the turn must outlive two leases.
	const lease = 1500 * time.Millisecond
	b := newBackend(t, "postgres")
	a, _ := b.service(t, &planner.Options{Lease: lease}, nil)
	bb, _ := b.service(t, &planner.Options{Lease: lease}, nil)
	id := b.newSession(t, a)
	wa, wb := watch(t, a, alice, id), watch(t, bb, alice, id)
	if _, err := a.Send(ctxT(t), alice, id, "slow"); err != nil {
		t.Fatal(err)
	}
	wb.until(t, planner.OutputText)
	// Leases are renewed while the turn runs.
	time.Sleep(2 * lease)
	if _, err := bb.Send(ctxT(t), alice, id, "hello"); !errors.Is(err, planner.ErrConflict) {
		t.Fatalf("Send while the turn runs past its first lease: %v", err)
	}

	planner.Abandon(a)
	got := shape(wb.until(t, planner.OutputDone))
	if !slices.Equal(got[len(got)-2:], []string{"error " + planner.StaleText, "done error"}) {
		t.Fatalf("output after the replica died: %v", got)
	}
	wb.quiet(t, 2*lease) // published once
	for len(wa.ch) > 0 {
		if o := <-wa.ch; o.Type == planner.OutputError || o.Type == planner.OutputDone {
			t.Fatalf("the dead replica's watcher got %+v", o)
		}
	}
	if _, err := bb.Send(ctxT(t), alice, id, "hello"); err != nil {
		t.Fatalf("Send after the takeover: %v", err)
	}
	if got := shape(wb.until(t, planner.OutputDone)); got[len(got)-1] != "done end_turn" {
		t.Fatalf("output %v", got)
	}
	if msgs := transcript(t, bb, id); roles(msgs) != "human human assistant" {
		t.Fatalf("transcript %s", roles(msgs))
	}
}

func TestSendTakesOverAStaleLease(t *testing.T) {
	const lease = 600 * time.Millisecond
	b := newBackend(t, "postgres")
	a, _ := b.service(t, &planner.Options{Lease: lease}, nil)
	bb, _ := b.service(t, &planner.Options{Lease: lease}, nil)
	// A watcher's replica whose own expiry check is far away: the Send reports the dead turn.
	c, _ := b.service(t, &planner.Options{Lease: 10 * time.Minute}, nil)
	id := b.newSession(t, a)
	wc := watch(t, c, alice, id)
	if _, err := a.Send(ctxT(t), alice, id, "slow"); err != nil {
		t.Fatal(err)
	}
	wc.until(t, planner.OutputText)
	planner.Abandon(a)
	waitFor(t, "the lease to expire", func() bool {
		s, _, err := bb.Transcript(ctxT(t), alice, id)
		return err == nil && !s.Running
	})
	if _, err := bb.Send(ctxT(t), alice, id, "hello"); err != nil {
		t.Fatal(err)
	}
	got := shape(wc.until(t, planner.OutputDone))
	if !slices.Equal(got[len(got)-2:], []string{"error " + planner.StaleText, "done error"}) || slices.Contains(got, "message 2") {
		t.Fatalf("output of the takeover: %v", got)
	}
	if got := shape(wc.until(t, planner.OutputDone)); got[0] != "message 2" || got[len(got)-1] != "done end_turn" {
		t.Fatalf("output of the new turn: %v", got)
	}
}

func TestBusReconnectEndsWatchesAsLagging(t *testing.T) {
	b := newBackend(t, "postgres")
	bus := b.bus(t)
	svc, _ := b.service(t, nil, bus)
	id := b.newSession(t, svc)
	w := watch(t, svc, alice, id)
	pid := bus.(*pgstore.Bus).ListenerPID()
	if _, err := b.pool.Exec(ctxT(t), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if o := w.next(t); o.Type != planner.OutputLagging || o.Session != id {
		t.Fatalf("output after a reconnect: %+v", o)
	}
	if np := bus.(*pgstore.Bus).ListenerPID(); np == pid || np == 0 {
		t.Fatalf("listener pid %d after reconnecting (was %d)", np, pid)
	}
	w2 := watch(t, svc, alice, id)
	if _, err := svc.Send(ctxT(t), alice, id, "hello"); err != nil {
		t.Fatal(err)
	}
	if got := shape(w2.until(t, planner.OutputDone)); got[len(got)-1] != "done end_turn" {
		t.Fatalf("output after the reconnect %v", got)
	}
}
