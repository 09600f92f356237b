package planner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/planner"
)

// keeperWait is a store whose Release returns only once the lease keeper has looked for
// expired leases twice more. The keeper renews and looks, each every Lease/3: a renewal
// round has then run between the lease given back and the rest of the turn's end.
type keeperWait struct {
	planner.Store
	mu   sync.Mutex
	left int           // calls of Expired Release still waits for
	done chan struct{} // closed when left reaches 0
}

func (s *keeperWait) Release(ctx context.Context, session, owner string) error {
	err := s.Store.Release(ctx, session, owner)
	s.mu.Lock()
	s.left, s.done = 2, make(chan struct{})
	done := s.done
	s.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return err
}

func (s *keeperWait) Expired(ctx context.Context, sessions []string) ([]planner.Lease, error) {
	s.mu.Lock()
	if s.left > 0 {
		if s.left--; s.left == 0 {
			close(s.done)
		}
	}
	s.mu.Unlock()
	return s.Store.Expired(ctx, sessions)
}

// A turn that ends gives its lease back before it publishes done. The keeper renewing the
// lease meanwhile finds it gone; that is no lost lease (which ends a turn silently, as
// another replica has ended it for the watchers): done still comes.
func TestDoneAfterARenewalFindsTheLeaseGivenBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		b.store = &keeperWait{Store: b.store}
		// Short, for quick keeper rounds; not so short that renewals on a loaded machine
		// lose it while the turn runs.
		svc, _ := b.service(t, &planner.Options{Lease: 1500 * time.Millisecond}, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		if _, err := svc.Send(ctxT(t), alice, id, "hello"); err != nil {
			t.Fatal(err)
		}
		if got := shape(w.until(t, planner.OutputDone)); got[len(got)-1] != "done end_turn" {
			t.Fatalf("output %v", got)
		}
		if _, err := svc.Send(ctxT(t), alice, id, "hello"); err != nil {
			t.Fatalf("Send after the turn: %v", err)
		}
		if got := shape(w.until(t, planner.OutputDone)); got[len(got)-1] != "done end_turn" {
			t.Fatalf("output %v", got)
		}
	})
}
