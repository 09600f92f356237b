package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// feed is a subscription's bounded channel to the application. While a
// subscription is being re-established after a gap, items wait in held so
// that the gap's hook runs before any of them reaches the application.
// The owner's mutex guards it.
type feed[T any] struct {
	ch   chan T
	done bool
	err  error
	hold bool
	held []T
}

// offer hands v over without blocking; false when the buffer is full.
func (f *feed[T]) offer(v T) bool {
	if f.hold {
		if len(f.held) >= cap(f.ch) {
			return false
		}
		f.held = append(f.held, v)
		return true
	}
	select {
	case f.ch <- v:
		return true
	default:
		return false
	}
}

// release ends holding and hands over what was held; false when the
// buffer overflowed.
func (f *feed[T]) release() bool {
	held := f.held
	f.hold, f.held = false, nil
	for _, v := range held {
		if !f.offer(v) {
			return false
		}
	}
	return true
}

func (f *feed[T]) end(err error) {
	if f.done {
		return
	}
	f.done, f.err, f.held, f.hold = true, err, nil, false
	close(f.ch)
}

// core is what stream subscriptions and planner watches share: an id in
// the connection's namespace, the connection the server serves it on, and
// the feed.
type core[T any] struct {
	c    *Client
	id   string
	self entry

	mu     sync.Mutex
	feed   feed[T]
	gen    uint64 // connection the server serves it on; 0 for none
	epoch  uint64 // counts lagging closes, to detect one during a subscribe
	active bool   // the first subscribe succeeded: restore after gaps
}

func (b *core[T]) init(c *Client, id string, self entry, buffer int) {
	b.c, b.id, b.self = c, id, self
	b.feed.ch = make(chan T, buffer)
}

func (b *core[T]) needsRestore(gen uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.active && !b.feed.done && b.gen != gen
}

// end closes the feed with err and returns the connection the server
// still serves the subscription on (0 for none).
func (b *core[T]) end(err error) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.feed.end(err)
	gen := b.gen
	b.gen = 0
	return gen
}

// offerLocked hands v to the application; on overflow the subscription
// ends with ErrSlowConsumer and is unsubscribed from connection gen.
// The caller holds b.mu and must call the returned function after
// unlocking.
func (b *core[T]) offerLocked(gen uint64, v T) (ok bool, after func()) {
	if b.feed.offer(v) {
		return true, func() {}
	}
	b.feed.end(ErrSlowConsumer)
	b.gen = 0
	return false, func() { b.c.abandon(b.id, b.self, gen) }
}

// serverClosed handles stream.closed: lagging is repaired by subscribing
// again from where the application is; any other reason ends the feed.
func (b *core[T]) serverClosed(gen uint64, reason string) {
	b.mu.Lock()
	if b.feed.done {
		b.mu.Unlock()
		return
	}
	if reason == "lagging" {
		if b.gen == gen {
			b.gen = 0
		}
		b.epoch++
		b.mu.Unlock()
		b.c.kick()
		return
	}
	b.feed.end(&ClosedError{Subscription: b.id, Reason: reason})
	b.gen = 0
	b.mu.Unlock()
	b.c.drop(b.id, b.self)
}

// settled records a successful subscribe on cn sent at epoch. It reports
// false when the subscription ended meanwhile; the server's side is then
// unsubscribed.
func (b *core[T]) settled(ctx context.Context, cn *conn, epoch uint64) bool {
	b.mu.Lock()
	done := b.feed.done
	if !done {
		b.active = true
		if b.epoch == epoch {
			b.gen = cn.gen
		} else {
			defer b.c.kick() // closed lagging while subscribing: again
		}
	}
	b.mu.Unlock()
	if done {
		_ = cn.callPatient(ctx, protocol.StreamUnsubscribe, protocol.UnsubscribeParams{Subscription: b.id}, nil)
	}
	return !done
}

// fail ends the subscription with err and forgets it, unsubscribing it
// if the server may still serve it.
func (b *core[T]) fail(err error) {
	if gen := b.self.end(err); gen != 0 {
		b.c.abandon(b.id, b.self, gen)
		return
	}
	b.c.drop(b.id, b.self)
}

// sentOn records that a subscribe whose answer never came was sent on
// connection gen, so that fail unsubscribes it there.
func (b *core[T]) sentOn(gen uint64) {
	b.mu.Lock()
	b.gen = gen
	b.mu.Unlock()
}

// Err returns why the subscription ended: nil after Unsubscribe, ErrClosed
// after Client.Close (or why the client gave up, StateFailed), ErrSlowConsumer, a *ClosedError, or the error of a
// failed resubscribe. It is nil while the subscription runs.
func (b *core[T]) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.feed.err
}

// ID returns the subscription id (unique on the client).
func (b *core[T]) ID() string { return b.id }

// Unsubscribe ends the subscription: its channel is closed and the server
// stops sending.
func (b *core[T]) Unsubscribe(ctx context.Context) error {
	return b.c.Unsubscribe(ctx, b.id)
}

// Unsubscribe ends the stream subscription or planner watch with this id.
// An id the client does not know is an error matching protocol.ErrNotFound.
func (c *Client) Unsubscribe(ctx context.Context, id string) error {
	e := c.lookup(id)
	if e == nil || !c.drop(id, e) {
		return fmt.Errorf("unsubscribe %s: %w", id, rpc.Errorf(protocol.ErrNotFound, "subscription %q not found", id))
	}
	gen := e.end(nil)
	c.mu.Lock()
	cn := c.cur
	c.mu.Unlock()
	if gen == 0 || cn == nil || cn.gen != gen {
		return nil // the server no longer has it
	}
	// The client has forgotten it: an unsubscribe refused for the rate is
	// sent again until ctx ends, or the server would keep counting it.
	err := cn.callPatient(ctx, protocol.StreamUnsubscribe, protocol.UnsubscribeParams{Subscription: id}, nil)
	if err == nil || rpc.Code(err) == int(protocol.ErrNotFound) || rpc.Code(err) == 0 && !isCtxErr(ctx) {
		return nil // done, or the server dropped it with the connection
	}
	return fmt.Errorf("unsubscribe %s: %w", id, err)
}

func isCtxErr(ctx context.Context) bool { return ctx.Err() != nil }
