package planner_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/planner"
)

// acquireCounter is a store that counts the leases asked of it, and the most asked at once.
type acquireCounter struct {
	planner.Store
	mu                     sync.Mutex
	calls, now, mostAtOnce int
}

func (s *acquireCounter) Acquire(ctx context.Context, session, owner, subject string, perSubject int, ttl time.Duration, tc planner.TraceContext) (bool, bool, error) {
	s.mu.Lock()
	s.calls++
	s.now++
	s.mostAtOnce = max(s.mostAtOnce, s.now)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
	}()
	return s.Store.Acquire(ctx, session, owner, subject, perSubject, ttl, tc)
}

// One person sends on 50 sessions at once, with TurnsPerSubject 2: two turns start, the
// others are refused with planner_turns, and the store is asked for two leases, one at a
// time. (Were each send to ask, a flood would hold every connection of the store's pool
// waiting on the person's lock there, and the renewals of every running turn with them.)
func TestSendFloodOfOnePersonAsksTheStoreOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		const sends, limit = 50, 2
		store := &acquireCounter{Store: b.store}
		b.store = store
		svc, _ := b.service(t, &planner.Options{TurnsPerSubject: limit, SessionRate: sends}, nil)
		sessions := make([]string, sends)
		for i := range sessions {
			sessions[i] = b.newSession(t, svc)
		}
		var wg sync.WaitGroup
		var started, refused atomic.Int32
		for _, id := range sessions {
			wg.Go(func() {
				_, err := svc.Send(ctxT(t), alice, id, "slow")
				var le *fault.Error
				switch {
				case err == nil:
					started.Add(1)
				case errors.As(err, &le) && le.Limit == planner.LimitTurns && le.Max == limit:
					refused.Add(1)
				default:
					t.Errorf("send: %v", err)
				}
			})
		}
		wg.Wait()
		if started.Load() != limit || refused.Load() != sends-limit {
			t.Fatalf("%d started and %d refused, want %d and %d", started.Load(), refused.Load(), limit, sends-limit)
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		if store.calls != limit || store.mostAtOnce != 1 {
			t.Fatalf("the store was asked for %d leases, %d at once; want %d, one at a time", store.calls, store.mostAtOnce, limit)
		}
	})
}
