package streams

import (
	"encoding/json"
	"hash/maphash"
	"sync"

	"github.com/ballet/gateway/codec"
)

const hubShards = 32

// Hub routes events from the tailer to the subscriptions of their streams.
// Registration and fan-out meet only on a shard's lock, so subscribing does
// not stall delivery to other streams. A subscription that cannot keep up is
// closed with ReasonLagging; nobody else waits for it.
type Hub struct {
	seed   maphash.Seed
	shards [hubShards]hubShard
	// onEvent, when set, sees every event after its fan-out (on the
	// dispatching goroutine), e.g. to react to permission changes.
	onEvent func(ev *Event)
	cache   bodyCache
	recent  recentEvents
}

type hubShard struct {
	mu   sync.RWMutex
	subs map[Stream]map[*Subscription]struct{}
}

// HubOptions configure a Hub. A nil *HubOptions means defaults.
type HubOptions struct {
	// OnEvent is called for every dispatched event after its fan-out, on
	// the dispatching goroutine; it must not block.
	OnEvent func(ev *Event)
}

// NewHub returns an empty hub.
func NewHub(opts *HubOptions) *Hub {
	h := &Hub{seed: maphash.MakeSeed()}
	for i := range h.cache.slots {
		h.cache.slots[i].seq = -1
	}
	for i := range h.shards {
		h.shards[i].subs = make(map[Stream]map[*Subscription]struct{})
	}
	if opts != nil {
		h.onEvent = opts.OnEvent
	}
	return h
}

func (h *Hub) shard(s Stream) *hubShard {
	return &h.shards[maphash.String(h.seed, s.Key)%hubShards]
}

// add registers sub; events dispatched from now on reach it.
func (h *Hub) add(sub *Subscription) {
	sh := h.shard(sub.stream)
	sh.mu.Lock()
	set := sh.subs[sub.stream]
	if set == nil {
		set = make(map[*Subscription]struct{})
		sh.subs[sub.stream] = set
	}
	set[sub] = struct{}{}
	sh.mu.Unlock()
}

// remove unregisters sub; it is a no-op when sub is not registered.
func (h *Hub) remove(sub *Subscription) {
	sh := h.shard(sub.stream)
	sh.mu.Lock()
	if set := sh.subs[sub.stream]; set != nil {
		delete(set, sub)
		if len(set) == 0 {
			delete(sh.subs, sub.stream)
		}
	}
	sh.mu.Unlock()
}

// Count returns the number of registered subscriptions.
func (h *Hub) Count() int {
	n := 0
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.RLock()
		for _, set := range sh.subs {
			n += len(set)
		}
		sh.mu.RUnlock()
	}
	return n
}

// Dispatch fans events out, in order, to the subscriptions of their streams.
// It must be called from one goroutine at a time, with events in seq order
// (the tailer's sink).
func (h *Hub) Dispatch(evs []Event) {
	// Recorded before the fan-out: a subscriber registered meanwhile
	// either replays an event from here or receives it live (or both,
	// and drops the duplicate by seq).
	h.recent.add(evs)
	var closed []*Subscription
	for i := range evs {
		p := Prepared{Event: &evs[i]}
		closed = h.deliver(Stream{Kind: StreamProject, Key: p.Event.ProjectKey}, &p, closed)
		if p.Event.EntityType == "item" && p.Event.EntityKey != "" {
			closed = h.deliver(Stream{Kind: StreamItem, Key: p.Event.EntityKey}, &p, closed)
		}
		if h.onEvent != nil {
			h.onEvent(p.Event)
		}
		h.applyAccessChange(p.Event)
	}
	for _, sub := range closed {
		h.remove(sub)
		sub.notifyClosed()
	}
}

func (h *Hub) deliver(s Stream, p *Prepared, closed []*Subscription) []*Subscription {
	sh := h.shard(s)
	sh.mu.RLock()
	for sub := range sh.subs[s] {
		if !sub.deliver(p, &h.cache) {
			closed = append(closed, sub)
		}
	}
	sh.mu.RUnlock()
	return closed
}

// CloseMatching closes, with reason, every subscription for which match
// returns true, and returns how many it closed.
func (h *Hub) CloseMatching(reason string, match func(sub *Subscription) bool) int {
	var victims []*Subscription
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.RLock()
		for _, set := range sh.subs {
			for sub := range set {
				if match(sub) {
					victims = append(victims, sub)
				}
			}
		}
		sh.mu.RUnlock()
	}
	n := 0
	for _, sub := range victims {
		if sub.markClosed(reason) {
			h.remove(sub)
			sub.notifyClosed()
			n++
		}
	}
	return n
}

// Prepared is an event with its notification bodies encoded at most once per
// codec, shared by every subscriber.
type Prepared struct {
	Event *Event
	body  [2][]byte
	err   [2]error
}

// Body returns the event's stream.event params (without "subscription")
// encoded in c, encoding it on first use. Not safe for concurrent use.
func (p *Prepared) Body(c codec.Codec) ([]byte, error) {
	i := 0
	if c.Binary() {
		i = 1
	}
	if p.body[i] == nil && p.err[i] == nil {
		p.body[i], p.err[i] = c.Marshal(wireEvent(p.Event))
	}
	return p.body[i], p.err[i]
}

// WireEvent is the stream.event params of an event, without "subscription".
type WireEvent struct {
	Seq        int64         `json:"seq"`
	Type       string        `json:"type"`
	EntityType string        `json:"entity_type"`
	EntityID   string        `json:"entity_id"`
	EntityKey  *string       `json:"entity_key"`
	OccurredAt int64         `json:"occurred_at"`
	Actor      WireActor     `json:"actor"`
	Payload    codec.RawJSON `json:"payload"`
}

// WireActor is who caused an event.
type WireActor struct {
	Kind    string `json:"kind"`
	Subject string `json:"subject"`
}

func wireEvent(e *Event) *WireEvent {
	w := &WireEvent{
		Seq: e.Seq, Type: e.Type, EntityType: e.EntityType, EntityID: e.EntityID,
		OccurredAt: e.OccurredAt.UnixMilli(),
		Actor:      WireActor{Kind: e.ActorKind, Subject: e.ActorSubject},
		Payload:    codec.RawJSON(e.Payload),
	}
	if e.EntityKey != "" {
		k := e.EntityKey
		w.EntityKey = &k
	}
	if len(w.Payload) == 0 {
		w.Payload = codec.RawJSON("{}")
	}
	return w
}

// applyAccessChange closes subscriptions that an event takes access from:
// member.revoked closes the revoked subject's subscriptions on the project
// with ReasonForbidden; project.deleted closes all of the project's with
// ReasonNotFound. Every gateway sees the event in the log, so this holds
// across replicas.
func (h *Hub) applyAccessChange(ev *Event) {
	switch ev.Type {
	case "member.revoked":
		var p struct {
			Subject string `json:"subject"`
		}
		if json.Unmarshal(ev.Payload, &p) != nil || p.Subject == "" {
			return
		}
		h.CloseMatching(ReasonForbidden, func(sub *Subscription) bool {
			return sub.subject == p.Subject && sub.stream.Project() == ev.ProjectKey
		})
	case "project.deleted":
		h.CloseMatching(ReasonNotFound, func(sub *Subscription) bool {
			return sub.stream.Project() == ev.ProjectKey
		})
	}
}
