package streams

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/protocol"
)

const hubShards = 32

// Hub routes events from the tailer to the subscriptions of their streams. Each dispatched
// event goes into one window of recent events, encoded once per codec in use; a
// subscription is a position in its stream, and Dispatch only wakes the connections of the
// stream's subscriptions, which pull the events when their sockets can take them
// (Subscription.Pull). Registration and fan-out meet only on a shard's lock, so subscribing
// does not stall delivery to other streams.
type Hub struct {
	seed   maphash.Seed
	shards [hubShards]hubShard
	// onEvent, when set, sees every event after its fan-out (on the
	// dispatching goroutine), e.g. to react to permission changes.
	onEvent func(ev *Event)
	// onAccessLost, when set, hears of every event that takes access away.
	onAccessLost func(project, subject, reason string)
	onDelivered  func(n int)
	onCatchUp    func(ok bool)
	catchUpLimit int // HubOptions.CatchUpLimit
	pages        pageBudget
	groupShared  int // the members from which a filter group keeps a memo (filtergroup.go)
	cache        bodyCache
	win          window
	// byCodec counts the registered subscriptions of each codec (codecIndex): Dispatch
	// encodes the events in the codecs that have one.
	byCodec [2]atomic.Int64
	// dispatching is set while Dispatch runs (atomic): a second caller panics.
	dispatching atomic.Bool

	// Catch-ups (catchup.go): a token of catchUps for each that reads the log; the hub's
	// goroutines are counted in wg and end with ctx.
	catchUps        chan struct{}
	catchUpsRunning atomic.Int64
	ctx             context.Context
	cancel          context.CancelFunc
	wg              sync.WaitGroup
}

type hubShard struct {
	mu     sync.RWMutex
	subs   map[Stream]map[*Subscription]struct{}
	groups map[groupKey]*filterGroup // the shard's streams' filter groups (filtergroup.go)
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
	// OnDelivered, when set, is told how many stream.event frames a pull handed to a
	// connection. It must not block.
	OnDelivered func(n int)
	// OnCatchUp, when set, is told of every catch-up from the log: ok, or closed lagging.
	OnCatchUp func(ok bool)
	// RecentBytes bounds the memory of the window of recent events every subscription pulls
	// from and replays read (BALLET_RECENT_EVENTS_BYTES): the events, at most 65,536, as
	// their encoded bodies (an event's payload is held only while its bodies cannot give it
	// back exactly). The same again bounds the bodies cached for replays from the log.
	// Default DefaultRecentBytes.
	RecentBytes int
	// CatchUps bounds the catch-ups that read the log at once (BALLET_MAX_CATCH_UPS); the
	// others wait for their turn. Default DefaultCatchUps.
	CatchUps int
	// CatchUpLimit is how many of its stream's events a subscription may be behind the window
	// and still catch up from the log (BALLET_CATCH_UP_LIMIT); further behind, it is closed
	// with ReasonLagging. It is not SubscribeRequest.ReplayLimit, which bounds a from_seq
	// replay. Default DefaultCatchUpLimit.
	CatchUpLimit int
	// CatchUpBytes bounds the pages of events read from the log (by catch-ups, and the first
	// of a replay) that the subscriptions hold until their connections pull them
	// (BALLET_CATCH_UP_BYTES): the pages read from least recently are let go, to be read again when their
	// readers read, before a catch-up reads another (pages.go). Default DefaultCatchUpBytes.
	CatchUpBytes int
}

// Defaults of HubOptions.
const (
	DefaultRecentBytes  = 32 << 20 // RecentBytes'
	DefaultCatchUps     = 8        // CatchUps'
	DefaultCatchUpLimit = 10000    // CatchUpLimit's
	DefaultCatchUpBytes = 64 << 20 // CatchUpBytes'
)

// WithDefaults returns o with its zero (or negative) bounds set to their defaults, as NewHub
// applies them.
func (o HubOptions) WithDefaults() HubOptions {
	if o.RecentBytes <= 0 {
		o.RecentBytes = DefaultRecentBytes
	}
	if o.CatchUps <= 0 {
		o.CatchUps = DefaultCatchUps
	}
	if o.CatchUpLimit <= 0 {
		o.CatchUpLimit = DefaultCatchUpLimit
	}
	if o.CatchUpBytes <= 0 {
		o.CatchUpBytes = DefaultCatchUpBytes
	}
	return o
}

// NewHub returns an empty hub. Close ends its catch-ups.
func NewHub(opts *HubOptions) *Hub {
	h := &Hub{seed: maphash.MakeSeed(), groupShared: groupShared}
	for i := range h.cache.slots {
		h.cache.slots[i].seq = -1
	}
	for i := range h.shards {
		h.shards[i].subs = make(map[Stream]map[*Subscription]struct{})
	}
	var o HubOptions
	if opts != nil {
		o = *opts
	}
	o = o.WithDefaults()
	h.onEvent, h.onAccessLost = o.OnEvent, o.OnAccessLost
	h.onDelivered, h.onCatchUp = o.OnDelivered, o.OnCatchUp
	h.catchUpLimit = o.CatchUpLimit
	h.pages.max, h.pages.grace = int64(o.CatchUpBytes), pageGrace
	h.win.maxBytes, h.cache.maxBytes = o.RecentBytes, o.RecentBytes
	h.catchUps = make(chan struct{}, o.CatchUps)
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// Close stops the catch-ups from the log and waits for them: the subscriptions catching up
// end unannounced (their connections are closing too). Delivery from the window goes on.
func (h *Hub) Close() {
	h.cancel()
	h.wg.Wait()
}

// RecentBytes is the memory the window of recent events and the cached bodies hold now.
func (h *Hub) RecentBytes() int {
	return h.win.heldBytes() + h.cache.heldBytes()
}

// CatchUpsRunning is the number of subscriptions catching up from the log now: reading it,
// waiting for their turn, or waiting for their subject's replay budget (SubscribeRequest.CatchUp).
func (h *Hub) CatchUpsRunning() int { return int(h.catchUpsRunning.Load()) }

func (h *Hub) shard(s Stream) *hubShard {
	return &h.shards[maphash.String(h.seed, s.Key)%hubShards]
}

// add registers sub; events dispatched from now on wake it.
func (h *Hub) add(sub *Subscription) {
	sh := h.shard(sub.stream)
	sh.mu.Lock()
	set := sh.subs[sub.stream]
	if set == nil {
		set = make(map[*Subscription]struct{})
		sh.subs[sub.stream] = set
	}
	set[sub] = struct{}{}
	if sub.types != nil {
		sh.joinGroupLocked(sub, h.groupShared)
	}
	sh.mu.Unlock()
	h.byCodec[codecIndex(sub.codec)].Add(1)
	h.win.retain(sub.stream)
}

// remove unregisters sub; it is a no-op when sub is not registered.
func (h *Hub) remove(sub *Subscription) {
	sh := h.shard(sub.stream)
	sh.mu.Lock()
	found := false
	if set := sh.subs[sub.stream]; set != nil {
		_, found = set[sub]
		delete(set, sub)
		if found {
			sh.leaveGroupLocked(sub)
		}
		if len(set) == 0 {
			delete(sh.subs, sub.stream)
		}
	}
	sh.mu.Unlock()
	if found {
		h.byCodec[codecIndex(sub.codec)].Add(-1)
		h.win.release(sub.stream)
	}
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

// Dispatch adds events, in order, to the window and wakes the subscriptions of their
// streams. It must be called from one goroutine at a time, with events in seq order (the
// tailer's sink); a call made while another runs panics. A subscription's connection pulls
// the events of one call that are its stream's together, in as few writes as its socket
// allows: a gateway that falls behind catches up with fewer writes, not more.
func (h *Hub) Dispatch(evs []Event) {
	if !h.dispatching.CompareAndSwap(false, true) {
		panic("streams: Hub.Dispatch called while another Dispatch runs: it must have one caller at a time")
	}
	defer h.dispatching.Store(false)
	enc := [2]bool{h.byCodec[0].Load() > 0, h.byCodec[1].Load() > 0}
	for len(evs) > 0 {
		// An event that takes access away ends a run: the events after
		// it enter the window once the subscriptions it closes are closed,
		// so none of them can pull one.
		n := 1
		for n < len(evs) && !takesAccess(&evs[n-1]) {
			n++
		}
		h.win.add(evs[:n], enc)
		h.wakeRun(evs[:n])
		for i := range n {
			if h.onEvent != nil {
				h.onEvent(&evs[i])
			}
			h.applyAccessChange(&evs[i])
		}
		evs = evs[n:]
	}
}

func takesAccess(ev *Event) bool {
	return ev.Type == "member.revoked" || ev.Type == "project.deleted"
}

// wakeRun wakes the subscriptions of every stream that evs have an event of.
func (h *Hub) wakeRun(evs []Event) {
	var seen [8]Stream
	streams := seen[:0]
	var many map[Stream]struct{} // past a few streams
	add := func(s Stream) {
		if many != nil {
			if _, ok := many[s]; ok {
				return
			}
			many[s] = struct{}{}
			streams = append(streams, s)
			return
		}
		for _, t := range streams {
			if t == s {
				return
			}
		}
		streams = append(streams, s)
		if len(streams) == cap(seen) {
			many = make(map[Stream]struct{}, 4*len(streams))
			for _, t := range streams {
				many[t] = struct{}{}
			}
		}
	}
	for i := range evs {
		p, s, both := streamsOf(&evs[i])
		add(p)
		if both {
			add(s)
		}
	}
	for _, s := range streams {
		h.wake(s)
	}
}

// wakeChunk is the fewest subscribers worth a goroutine of their own in a fan-out: a wake-up
// is often one write to a socket, a few microseconds, so one stream's subscribers are spread
// over the CPUs when there are many of them.
const wakeChunk = 128

var subSlices = sync.Pool{New: func() any { s := make([]*Subscription, 0, 256); return &s }}

// wake wakes the subscriptions of stream s.
func (h *Hub) wake(s Stream) {
	sh := h.shard(s)
	sh.mu.RLock()
	set := sh.subs[s]
	if !parallelFanout || len(set) < 2*wakeChunk || runtime.GOMAXPROCS(0) == 1 {
		for sub := range set {
			sub.wake()
		}
		sh.mu.RUnlock()
		return
	}
	sp := subSlices.Get().(*[]*Subscription)
	subs := (*sp)[:0]
	for sub := range set {
		subs = append(subs, sub)
	}
	sh.mu.RUnlock()
	parts := min(runtime.GOMAXPROCS(0), len(subs)/wakeChunk)
	size := (len(subs) + parts - 1) / parts
	var wg sync.WaitGroup
	for k := 1; k < parts; k++ {
		part := subs[k*size : min((k+1)*size, len(subs))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, sub := range part {
				sub.wake()
			}
		}()
	}
	for _, sub := range subs[:size] {
		sub.wake()
	}
	wg.Wait()
	clear(subs)
	*sp = subs[:0]
	subSlices.Put(sp)
}

// closeAfter closes, with reason, every subscription for which match returns true, once it
// has sent its stream's events up to seq: they leave the hub now.
func (h *Hub) closeAfter(seq int64, reason string, match func(sub *Subscription) bool) {
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
	for _, sub := range victims {
		h.remove(sub)
		sub.closeAfter(seq, reason)
	}
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

// WireEvent is the stream.event params of an event, without "subscription": protocol's type.
type WireEvent = protocol.Event

// WireActor is who caused an event.
type WireActor = protocol.Actor

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
		h.closeAfter(ev.Seq, reason, func(sub *Subscription) bool {
			return sub.subject == subject && sub.stream.Project() == ev.ProjectKey
		})
	case "project.deleted":
		reason = ReasonNotFound
		h.closeAfter(ev.Seq, reason, func(sub *Subscription) bool {
			return sub.stream.Project() == ev.ProjectKey
		})
	default:
		return
	}
	if h.onAccessLost != nil {
		h.onAccessLost(ev.ProjectKey, subject, reason)
	}
}
