package streams

import (
	"encoding/json"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"

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
	// onAccessLost, when set, hears of every event that takes access away.
	onAccessLost func(project, subject, reason string)
	cache        bodyCache
	recent       recentEvents
	// dispatching is set while Dispatch runs (atomic): a second caller panics.
	dispatching atomic.Bool
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
	// OnAccessLost is called when an event takes tracker.read on project
	// away: from subject for member.revoked (reason ReasonForbidden), from
	// everyone for project.deleted (subject "", reason ReasonNotFound). It
	// runs on the dispatching goroutine once the stream subscriptions the
	// event closes are closed, before the events after it go out, so what
	// it ends (planner watches) ends at the same point of the log; it must
	// not block.
	OnAccessLost func(project, subject, reason string)
	// RecentBytes bounds the memory of the recent events the hub keeps for replays
	// (BALLET_RECENT_EVENTS_BYTES): the last 8192 events, fewer when they are larger than
	// this, and as much again for their encoded bodies. Default DefaultRecentBytes.
	RecentBytes int
}

// DefaultRecentBytes is HubOptions.RecentBytes' default.
const DefaultRecentBytes = 64 << 20

// NewHub returns an empty hub.
func NewHub(opts *HubOptions) *Hub {
	h := &Hub{seed: maphash.MakeSeed()}
	for i := range h.cache.slots {
		h.cache.slots[i].seq = -1
	}
	for i := range h.shards {
		h.shards[i].subs = make(map[Stream]map[*Subscription]struct{})
	}
	budget := DefaultRecentBytes
	if opts != nil {
		h.onEvent, h.onAccessLost = opts.OnEvent, opts.OnAccessLost
		if opts.RecentBytes > 0 {
			budget = opts.RecentBytes
		}
	}
	h.recent.maxBytes, h.cache.maxBytes = budget, budget
	return h
}

// RecentBytes is the memory the recent events and their cached bodies hold now.
func (h *Hub) RecentBytes() int {
	return h.recent.heldBytes() + h.cache.heldBytes()
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
// (the tailer's sink); a call made while another runs panics. A subscription gets the events of one call that are
// its stream's together, in one write when its connection allows: a
// gateway that falls behind catches up with fewer writes, not more.
func (h *Hub) Dispatch(evs []Event) {
	if !h.dispatching.CompareAndSwap(false, true) {
		panic("streams: Hub.Dispatch called while another Dispatch runs: it must have one caller at a time")
	}
	defer h.dispatching.Store(false)
	// Recorded before the fan-out: a subscriber registered meanwhile
	// either replays an event from here or receives it live (or both,
	// and drops the duplicate by seq).
	h.recent.add(evs)
	var closed []*Subscription
	for len(evs) > 0 {
		// An event that takes access away ends a run: the events after
		// it go out once the subscriptions it closes are closed.
		n := 1
		for n < len(evs) && !takesAccess(&evs[n-1]) {
			n++
		}
		closed = h.dispatchRun(evs[:n], closed)
		for i := range n {
			if h.onEvent != nil {
				h.onEvent(&evs[i])
			}
			h.applyAccessChange(&evs[i])
		}
		evs = evs[n:]
	}
	for _, sub := range closed {
		h.remove(sub)
		sub.notifyClosed()
	}
}

func takesAccess(ev *Event) bool {
	return ev.Type == "member.revoked" || ev.Type == "project.deleted"
}

// streamRun is the events of one dispatch that go to one stream.
type streamRun struct {
	s  Stream
	ps []*Prepared
}

func (h *Hub) dispatchRun(evs []Event, closed []*Subscription) []*Subscription {
	ps := make([]Prepared, len(evs))
	var runs []streamRun
	var index map[Stream]int // past a few streams
	add := func(s Stream, p *Prepared) {
		if index == nil && len(runs) > 8 {
			index = make(map[Stream]int, 2*len(runs))
			for i, r := range runs {
				index[r.s] = i
			}
		}
		i := -1
		if index != nil {
			if j, ok := index[s]; ok {
				i = j
			}
		} else {
			for j := range runs {
				if runs[j].s == s {
					i = j
					break
				}
			}
		}
		if i < 0 {
			i = len(runs)
			runs = append(runs, streamRun{s: s})
			if index != nil {
				index[s] = i
			}
		}
		runs[i].ps = append(runs[i].ps, p)
	}
	for i := range evs {
		p := &ps[i]
		p.Event = &evs[i]
		add(Stream{Kind: StreamProject, Key: p.Event.ProjectKey}, p)
		if p.Event.EntityType == "item" && p.Event.EntityKey != "" {
			add(Stream{Kind: StreamItem, Key: p.Event.EntityKey}, p)
		}
	}
	for _, r := range runs {
		closed = h.deliver(r.s, r.ps, closed)
	}
	return closed
}

// fanoutChunk is the fewest subscribers worth a goroutine of their own in
// a fan-out: a delivery is usually one write to a socket, a few
// microseconds, so one stream's subscribers are spread over the CPUs when
// there are many of them.
const fanoutChunk = 128

var (
	subSlices  = sync.Pool{New: func() any { s := make([]*Subscription, 0, 256); return &s }}
	bodySlices = sync.Pool{New: func() any { s := make([][]byte, 0, 16); return &s }}
)

// deliver offers the run ps of stream s to its subscriptions and adds the
// ones that overflowed to closed.
func (h *Hub) deliver(s Stream, ps []*Prepared, closed []*Subscription) []*Subscription {
	sh := h.shard(s)
	sh.mu.RLock()
	set := sh.subs[s]
	if !parallelFanout || len(set) < 2*fanoutChunk || runtime.GOMAXPROCS(0) == 1 {
		bodies := bodySlices.Get().(*[][]byte)
		for sub := range set {
			if !sub.deliverRun(ps, &h.cache, bodies) {
				closed = append(closed, sub)
			}
		}
		sh.mu.RUnlock()
		bodySlices.Put(bodies)
		return closed
	}
	// A snapshot: a subscription added after it has read a head that
	// covers these (committed) events, one removed meanwhile is closed and
	// takes nothing.
	sp := subSlices.Get().(*[]*Subscription)
	subs := (*sp)[:0]
	for sub := range set {
		subs = append(subs, sub)
	}
	sh.mu.RUnlock()
	closed = h.deliverParallel(subs, ps, closed)
	clear(subs)
	*sp = subs[:0]
	subSlices.Put(sp)
	return closed
}

// deliverParallel offers ps to subs in up to GOMAXPROCS parts at once and
// returns when all are done, so each subscription still sees the events
// of one dispatch at a time, in order.
func (h *Hub) deliverParallel(subs []*Subscription, ps []*Prepared, closed []*Subscription) []*Subscription {
	// The bodies are encoded before the parts share ps.
	var seen [2]bool
	for _, sub := range subs {
		i := codecIndex(sub.codec)
		if !seen[i] {
			seen[i] = true
			for _, p := range ps {
				_, _ = h.cache.body(p, sub.codec)
			}
			if seen[0] && seen[1] {
				break
			}
		}
	}
	parts := min(runtime.GOMAXPROCS(0), len(subs)/fanoutChunk)
	size := (len(subs) + parts - 1) / parts
	lost := make([][]*Subscription, parts)
	var wg sync.WaitGroup
	for k := 1; k < parts; k++ {
		part := subs[k*size : min((k+1)*size, len(subs))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			lost[k] = h.deliverAll(part, ps, nil)
		}()
	}
	lost[0] = h.deliverAll(subs[:size], ps, nil)
	wg.Wait()
	for _, l := range lost {
		closed = append(closed, l...)
	}
	return closed
}

func (h *Hub) deliverAll(subs []*Subscription, ps []*Prepared, closed []*Subscription) []*Subscription {
	bodies := bodySlices.Get().(*[][]byte)
	for _, sub := range subs {
		if !sub.deliverRun(ps, &h.cache, bodies) {
			closed = append(closed, sub)
		}
	}
	bodySlices.Put(bodies)
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
// across replicas. OnAccessLost hears of it afterwards.
func (h *Hub) applyAccessChange(ev *Event) {
	var subject, reason string
	switch ev.Type {
	case "member.revoked":
		var p struct {
			Subject string `json:"subject"`
		}
		if json.Unmarshal(ev.Payload, &p) != nil || p.Subject == "" {
			return
		}
		subject, reason = p.Subject, ReasonForbidden
		h.CloseMatching(reason, func(sub *Subscription) bool {
			return sub.subject == subject && sub.stream.Project() == ev.ProjectKey
		})
	case "project.deleted":
		reason = ReasonNotFound
		h.CloseMatching(reason, func(sub *Subscription) bool {
			return sub.stream.Project() == ev.ProjectKey
		})
	default:
		return
	}
	if h.onAccessLost != nil {
		h.onAccessLost(ev.ProjectKey, subject, reason)
	}
}
