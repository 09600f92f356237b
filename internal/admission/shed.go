package admission

import (
	"cmp"
	"context"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// The replica's budget for queued bytes (BALLET_REPLICA_QUEUE_BYTES): what every connection
// has queued and not yet written, together. Past it the connections with the most queued are
// closed until the sum is back under shedTarget of the budget; their clients reconnect (to
// this replica or another) and resume from where they were.

// ShedOptions.Budget's default: the Go memory limit over QueueBudgetDivisor, or
// DefaultQueueBudget without one.
const (
	DefaultQueueBudget = 1 << 30
	QueueBudgetDivisor = 4
)

// shedPause is how long the shedder waits between rounds for the connections it closed to
// let their queues go.
const shedPause = 25 * time.Millisecond

// shedTarget is the part of the budget a round sheds down to, so that the next burst does
// not start another round at once.
const shedTarget = 0.75

// ShedOptions tell a Shedder what its connections, of type C, are. Every function is
// required; none is called on a message's path, only by the shedder's goroutine.
type ShedOptions[C any] struct {
	// Budget is the bytes the connections may have queued together; zero means a quarter
	// of the Go memory limit (GOMEMLIMIT, which serve sets from the container's limit), or
	// 1 GiB without one.
	Budget int64
	// Total is what the connections have queued together now.
	Total func() int64
	// Conns lists the connections open now.
	Conns func() []C
	// Queued is what c has queued and not yet written.
	Queued func(c C) int64
	// Closing reports whether c is closing already: what it has queued counts as gone.
	Closing func(c C) bool
	// Shed closes c, which had queued bytes, as one of the most behind.
	Shed func(c C, queued int64)
}

// Shedder keeps what the replica's connections have queued together under a budget: once
// Over reports the sum past it, a goroutine closes the connections with the most queued,
// round after round, until the sum is back within the budget, and then ends. Close stops it
// and waits for it. Safe for concurrent use.
type Shedder[C any] struct {
	o      ShedOptions[C]
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu   sync.Mutex    // guards done
	done chan struct{} // the running goroutine's; nil when none runs
}

// NewShedder returns a shedder of o's connections; it runs nothing until Over.
func NewShedder[C any](o *ShedOptions[C]) *Shedder[C] {
	s := &Shedder[C]{o: *o}
	s.o.Budget = queueBudget(o.Budget)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// queueBudget is the budget: the setting, or a quarter of the Go memory limit, or 1 GiB
// without one.
func queueBudget(setting int64) int64 {
	if setting > 0 {
		return setting
	}
	if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < math.MaxInt64 {
		return lim / QueueBudgetDivisor
	}
	return DefaultQueueBudget
}

// Budget is ShedOptions.Budget as applied.
func (s *Shedder[C]) Budget() int64 { return s.o.Budget }

// Over runs as the queued bytes pass the budget (rpc.NewTotal's over: on a sender's
// goroutine, with its connection locked): it starts the shedder's goroutine unless it runs
// or the shedder is closed, and returns at once.
func (s *Shedder[C]) Over() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil || s.ctx.Err() != nil {
		return
	}
	s.done = make(chan struct{})
	go s.run()
}

// run closes connections, most queued first, while the total is over the budget.
func (s *Shedder[C]) run() {
	for {
		for s.o.Total() > s.o.Budget && s.ctx.Err() == nil {
			s.round()
			t := time.NewTimer(shedPause)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
			}
		}
		s.mu.Lock()
		// Over again since the loop looked: Over saw the goroutine running.
		if s.o.Total() > s.o.Budget && s.ctx.Err() == nil {
			s.mu.Unlock()
			continue
		}
		close(s.done)
		s.done = nil
		s.mu.Unlock()
		return
	}
}

// round closes the connections with the most queued until what is left, counting the
// connections already closing as gone, is under shedTarget of the budget.
func (s *Shedder[C]) round() {
	type queuedConn struct {
		c     C
		bytes int64
	}
	var open []queuedConn
	excess := s.o.Total() - int64(shedTarget*float64(s.o.Budget))
	for _, c := range s.o.Conns() {
		b := s.o.Queued(c)
		if s.o.Closing(c) {
			excess -= b
		} else if b > 0 {
			open = append(open, queuedConn{c, b})
		}
	}
	slices.SortFunc(open, func(a, b queuedConn) int { return cmp.Compare(b.bytes, a.bytes) })
	for _, q := range open {
		if excess <= 0 {
			return
		}
		excess -= q.bytes
		s.o.Shed(q.c, q.bytes)
	}
}

// Close stops the shedder: a running goroutine ends after its round, and Close waits for it;
// Over starts none afterwards. It is safe to call more than once.
func (s *Shedder[C]) Close() {
	s.mu.Lock()
	s.cancel()
	done := s.done
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}
