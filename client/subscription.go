package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// Event is one stream.event: an event of the log on a subscription, as Go
// programs read it (protocol.EventParams is the wire's form, whose
// entity_key is null when the event has none). The JSON form is the
// notification's params, without a null entity_key.
type Event struct {
	Subscription string        `json:"subscription"`
	Seq          int64         `json:"seq"`
	Type         string        `json:"type"`
	EntityType   string        `json:"entity_type"`
	EntityID     string        `json:"entity_id"`
	EntityKey    string        `json:"entity_key,omitempty"` // "" when the event has none
	OccurredAt   int64         `json:"occurred_at"`          // Unix milliseconds
	Actor        Actor         `json:"actor"`
	Payload      codec.RawJSON `json:"payload"` // JSON text, whatever the codec
}

// eventOf returns the event of a stream.event's params.
func eventOf(p *protocol.EventParams) Event {
	ev := Event{
		Subscription: p.Subscription, Seq: p.Seq, Type: p.Type, EntityType: p.EntityType, EntityID: p.EntityID,
		OccurredAt: p.OccurredAt, Actor: p.Actor, Payload: p.Payload,
	}
	if p.EntityKey != nil {
		ev.EntityKey = *p.EntityKey
	}
	return ev
}

// Actor is who caused an event: its kind ("human", "agent", "system", …) and subject.
type Actor = protocol.Actor

// Time returns OccurredAt as a time.
func (e *Event) Time() time.Time { return time.UnixMilli(e.OccurredAt) }

// SubscribeOptions configure Subscribe. A nil *SubscribeOptions means
// defaults.
type SubscribeOptions struct {
	// FromSeq, when set, asks for the stream's events after it first (the
	// server replays them, then continues live). Too old a FromSeq fails
	// Subscribe with an error matching protocol.ErrResyncRequired; start again
	// without it and reload the snapshot.
	FromSeq *int64
	// Types, when set, asks for only the events of these types, live and
	// replayed: exact names ("dependency.added") or prefixes ending in "*"
	// ("item.*"). Seqs stay increasing, with gaps where events were left
	// out; resuming after a reconnect keeps the filter.
	Types []string
	// Presence makes the caller present on the stream while the subscription
	// lives, and has the client follow who else is: see Present and
	// PresenceChanged.
	Presence bool
	// ItemPresence, on a project stream, has the client follow who has each
	// of the project's items open (those who subscribed to item:<KEY> with
	// Presence), without making the caller present anywhere: see
	// ItemsPresent and PresenceChanged.
	ItemPresence bool
	// Buffer is the capacity of the Events channel. When an event arrives
	// and the buffer is full, the subscription ends with ErrSlowConsumer (the
	// connection and other subscriptions go on). Default 4096.
	Buffer int
	// OnResync is called when, after a reconnect or a lagging close, the
	// server can no longer replay from the last delivered seq (-32010). The
	// client has then subscribed again without from_seq; seq is the log
	// position it returned. Events after seq follow on the channel, none of
	// them before OnResync returns; events in between are not delivered:
	// the application reloads its snapshot (the client recipe), applying
	// events idempotently. OnResync runs on the client's own goroutine and
	// must return quickly (signal the application, do not reload inside).
	// When nil, such a subscription ends with an error matching
	// protocol.ErrResyncRequired instead.
	OnResync func(seq int64)
}

// Subscription is a subscription to one change stream. Its events arrive on
// Events, each exactly once and in seq order, across reconnects.
type Subscription struct {
	core[Event]
	stream   string
	types    []string
	presence *presence // nil without SubscribeOptions.Presence or ItemPresence
	// itemPresence: SubscribeOptions.ItemPresence.
	itemPresence bool
	onResync     func(seq int64)
	seq          int64 // log position at the first subscribe

	// Guarded by mu.
	last    int64 // highest seq delivered, or the subscribe position
	hasLast bool  // last is a position to resume from
}

var _ entry = (*Subscription)(nil)

// Subscribe subscribes to stream ("project:<KEY>" or "item:<KEY>"). While
// the client is reconnecting it waits for the next connection, up to ctx.
// Errors from the server match protocol.ErrForbidden, protocol.ErrNotFound,
// rpc.ErrInvalidParams or protocol.ErrResyncRequired. A client may follow one
// stream several times, with the same Types or not: each Subscription gets
// every event of its own.
func (c *Client) Subscribe(ctx context.Context, stream string, opts *SubscribeOptions) (*Subscription, error) {
	var o SubscribeOptions
	if opts != nil {
		o = *opts
	}
	if o.Buffer <= 0 {
		o.Buffer = 4096
	}
	s := &Subscription{stream: stream, types: slices.Clone(o.Types), onResync: o.OnResync}
	if o.Presence || o.ItemPresence {
		s.presence = newPresence(o.Presence)
		s.itemPresence = o.ItemPresence
	}
	s.init(c, c.newID(), s, o.Buffer)
	if o.FromSeq != nil {
		s.last, s.hasLast = *o.FromSeq, true
	}
	if err := c.register(s.id, s); err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", stream, err)
	}
	err := s.first(ctx)
	if err != nil {
		s.fail(err)
		if c.isClosed() {
			err = ErrClosed
		}
		return nil, fmt.Errorf("subscribe %s: %w", stream, err)
	}
	return s, nil
}

// params are stream.subscribe's params without from_seq. With presence,
// they also start the followed list afresh: the snapshot of the new
// subscription comes next, possibly before its result.
func (s *Subscription) params() protocol.SubscribeParams {
	if s.presence != nil {
		s.presence.reset()
	}
	return protocol.SubscribeParams{Subscription: s.id, Stream: s.stream, Types: s.types,
		Presence: s.presence != nil && s.presence.own, ItemPresence: s.itemPresence}
}

// first makes the first subscribe, retrying on the next connection when
// the connection ends before the answer.
func (s *Subscription) first(ctx context.Context) error {
	for {
		cn, err := s.c.waitConn(ctx)
		if err != nil {
			return err
		}
		s.mu.Lock()
		p := s.params()
		if s.hasLast {
			from := s.last
			p.FromSeq = &from
		}
		epoch := s.epoch
		s.mu.Unlock()
		var res protocol.SubscribeResult
		err = cn.call(ctx, protocol.StreamSubscribe, p, &res)
		if errors.Is(err, ErrConnectionLost) && ctx.Err() == nil && !s.c.isClosed() {
			continue
		}
		if err != nil {
			if rpc.Code(err) == 0 {
				s.sentOn(cn.gen) // the server may have it: unsubscribe
			}
			return err
		}
		s.mu.Lock()
		s.seq = res.Seq
		if p.FromSeq == nil {
			s.last = max(s.last, res.Seq)
		}
		s.hasLast = true
		s.mu.Unlock()
		if !s.settled(ctx, cn, epoch) {
			if err := s.Err(); err != nil {
				return err
			}
			return ErrClosed
		}
		// The connection may have been replaced while subscribing.
		s.c.kick()
		return nil
	}
}

// deliver hands a stream.event from connection gen to the application,
// dropping what was already delivered.
func (s *Subscription) deliver(gen uint64, ev Event) {
	s.mu.Lock()
	if s.feed.done || (s.hasLast && ev.Seq <= s.last) {
		s.mu.Unlock()
		return
	}
	ok, after := s.offerLocked(gen, ev)
	if ok {
		s.last, s.hasLast = ev.Seq, true
	}
	s.mu.Unlock()
	after()
}

// restore subscribes again on cn from the last delivered seq.
func (s *Subscription) restore(ctx context.Context, cn *conn) error {
	s.mu.Lock()
	if s.feed.done || !s.active || s.gen == cn.gen {
		s.mu.Unlock()
		return nil
	}
	from, epoch := s.last, s.epoch
	s.mu.Unlock()
	p := s.params()
	p.FromSeq = &from
	err := cn.callPatient(ctx, protocol.StreamSubscribe, p, nil)
	switch {
	case err == nil:
		s.settled(ctx, cn, epoch)
		return nil
	case rpc.Code(err) == 0:
		return err
	case errors.Is(err, protocol.ErrResyncRequired) && s.onResync != nil:
		return s.resync(ctx, cn)
	}
	s.fail(fmt.Errorf("resubscribe %s from seq %d: %w", s.stream, from, err))
	return nil
}

// resync subscribes without from_seq and runs OnResync before any new
// event reaches the application.
func (s *Subscription) resync(ctx context.Context, cn *conn) error {
	s.mu.Lock()
	old, epoch := s.last, s.epoch
	s.feed.hold = true
	s.mu.Unlock()
	var res protocol.SubscribeResult
	err := cn.callPatient(ctx, protocol.StreamSubscribe, s.params(), &res)
	if err != nil {
		s.mu.Lock()
		s.feed.hold, s.feed.held, s.last = false, nil, old
		s.mu.Unlock()
		if rpc.Code(err) == 0 {
			return err
		}
		s.fail(fmt.Errorf("resubscribe %s: %w", s.stream, err))
		return nil
	}
	s.mu.Lock()
	s.last = max(s.last, res.Seq)
	s.mu.Unlock()
	if !s.settled(ctx, cn, epoch) {
		return nil
	}
	s.c.log.Info("stream resync: events were missed", "subscription", s.id, "stream", s.stream,
		"last_delivered", old, "seq", res.Seq)
	s.onResync(res.Seq)
	s.mu.Lock()
	if s.feed.done || s.feed.release() {
		s.mu.Unlock()
		return nil
	}
	s.feed.end(ErrSlowConsumer)
	s.gen = 0
	s.mu.Unlock()
	s.c.abandon(s.id, s, cn.gen)
	return nil
}

// Events returns the channel of events. It is closed when the subscription
// ends; Err then says why.
func (s *Subscription) Events() <-chan Event { return s.feed.ch }

// Stream returns the stream name.
func (s *Subscription) Stream() string { return s.stream }

// Seq returns the log position the first subscribe returned.
func (s *Subscription) Seq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// LastSeq returns the seq of the last event handed to the channel (or the
// subscribe position when none was): where the client resumes from.
func (s *Subscription) LastSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}
