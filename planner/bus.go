package planner

import (
	"context"

	"github.com/ballet/gateway/internal/subscribers"
)

// Note is what the Bus carries between replicas: a turn's Output, a request to cancel a
// session's turn, or a marker. Its JSON form is {"session", "output"} or {"session", "cancel"}.
type Note struct {
	Session string  `json:"session,omitempty"`
	Output  *Output `json:"output,omitempty"`
	// Cancel asks the replica running the session's turn to stop it.
	Cancel bool `json:"cancel,omitempty"`
	// Sync is a marker a replica publishes to learn when its earlier notes were delivered.
	Sync string `json:"sync,omitempty"`
	// Lost is set by a Bus, never published: notes may have been lost before this one (the
	// connection that receives them was re-established).
	Lost bool `json:"-"`
}

// Bus carries notes to every replica that shares a Store, this one included: all watchers
// receive output the same way, so every replica sees the same sequence.
type Bus interface {
	// Publish sends notes, in order, to every subscriber of every replica, as few messages
	// as they fit in. Notes published one after the other (one Publish returning before the
	// next starts, on any replica) are delivered in that order everywhere.
	Publish(ctx context.Context, notes ...Note) error
	// Subscribe calls fn for every note whose Session want accepts (want nil: every note;
	// notes without a session reach every subscriber), in order, on one goroutine, until
	// cancel is called (after cancel returns fn is not called any more). want is told too
	// whether the note carries an Output. A note want refuses costs the subscriber no
	// decoding. want and fn must not block.
	Subscribe(want func(session string, output bool) bool, fn func(Note)) (cancel func())
}

// MemoryBus is the Bus of one process: Publish delivers to the subscribers before it
// returns. It starts no goroutine and needs no Close.
type MemoryBus struct {
	subs subscribers.Set[Note]
}

var _ Bus = (*MemoryBus)(nil)

// NewMemoryBus returns an empty in-process bus.
func NewMemoryBus() *MemoryBus { return &MemoryBus{} }

// Publish calls every subscriber with each note; ctx only matters for its error.
func (b *MemoryBus) Publish(ctx context.Context, notes ...Note) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, n := range notes {
		n.Lost = false
		b.subs.Publish(n)
	}
	return nil
}

// Subscribe registers fn.
func (b *MemoryBus) Subscribe(want func(session string, output bool) bool, fn func(Note)) func() {
	return b.subs.Subscribe(func(n Note) {
		if n.Session == "" || want == nil || want(n.Session, n.Output != nil) {
			fn(n)
		}
	})
}
