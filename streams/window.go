package streams

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/ballet/gateway/codec"
)

// window is the hub's recent events, each held once as its stream.event body encoded at most
// once per codec (the decoded event, payload and all, is let go once the bodies carry it),
// bounded in bytes and in count, and indexed per stream. Subscriptions keep a position in it
// and their connections pull the events after it (Subscription.Pull): a burst is held once
// however many subscribers it has, and a reader that does not read costs its position, not
// copies of events. Replays of recent events read it too.
//
// The events are added in seq order (Dispatch) and the tailer dispatches every committed
// event after its position, so the window holds every dispatched event with a seq in
// (floor, last]; the oldest go first. For a stream with subscriptions it also knows the last
// of its events it let go (evicted), so that a position below floor misses events only when
// that is after it: its subscription then catches up from the log (catchup.go). A
// subscription of a quiet stream is not sent to the log because other streams were busy.
type window struct {
	mu    sync.RWMutex
	ring  []*item // ring[(start+i)%len], n of them, in seq order
	start int
	n     int
	floor int64 // every dispatched event after floor and up to last is held
	last  int64
	// resets counts the times the log's seqs went backwards (a reset log): items carry it, so
	// that an answer kept for a seq is not taken for another event with that seq.
	resets uint16
	// index is, for each stream with an event in the window, its events in seq order.
	index map[Stream]*streamItems
	// bytes is what the held items take (itemBytes), at most maxBytes but for bodies encoded
	// lazily since the last add: the oldest go first. An item changes, and its count with it,
	// under mu (read-locked for a lazy body): never once it has left (gone).
	bytes    atomic.Int64
	maxBytes int // HubOptions.RecentBytes, as NewHub sets it
	events   int // the most events held: windowEvents unless set (tests)
}

// windowEvents is the most events the window holds, whatever their size.
const windowEvents = 1 << 16

// item is one event of the window: what reading it needs (its seq, type and streams) and its
// bodies. It keeps the decoded event (ev) only while its bodies do not carry it: while it has
// neither body, or one the other cannot be transcoded from exactly (bodies.go).
type item struct {
	seq     int64
	typ     string
	project string
	key     string // the key of the item whose event it is, "" for others
	ev      atomic.Pointer[Event]
	body    [2]atomic.Pointer[[]byte] // by codecIndex, encoded on first use
	gone    bool                      // let go by the window; guarded by window.mu
	epoch   uint16                    // the window's resets when it came (filtergroup.go)
}

// newItem returns the item of ev, without its bodies or the event yet.
func newItem(ev *Event) *item {
	it := &item{seq: ev.Seq, typ: ev.Type, project: ev.ProjectKey}
	if _, s, ok := streamsOf(ev); ok {
		it.key = s.Key
	}
	return it
}

// streams returns the streams the item's event belongs to, as streamsOf.
func (it *item) streams() (Stream, Stream, bool) {
	return Stream{Kind: StreamProject, Key: it.project}, Stream{Kind: StreamItem, Key: it.key}, it.key != ""
}

// bodiesCarry reports whether the item's bodies carry ev, which it was made of: both are
// there, or one the other is transcoded from exactly.
func (it *item) bodiesCarry(ev *Event) bool {
	j, m := it.body[0].Load() != nil, it.body[1].Load() != nil
	return j && m || j && msgpackTranscodes(ev) || m && jsonTranscodes(ev)
}

// streamItems is a stream's events in the window: items[head:], in seq order. It stays while
// the stream has events in the window or subscriptions (subs), and knows, for positions from
// since on, the last of the stream's events the window let go (evicted; 0 for none).
type streamItems struct {
	items   []*item
	head    int
	subs    int
	since   int64
	evicted int64
}

func (s *streamItems) live() []*item { return s.items[s.head:] }

// after returns the index in live() of the first item with a seq above seq.
func (s *streamItems) after(seq int64) int {
	l := s.live()
	return sort.Search(len(l), func(i int) bool { return l[i].seq > seq })
}

// eventBytes is what an event held in memory counts: its payload, its strings, its fields.
func eventBytes(ev *Event) int {
	return len(ev.Payload) + len(ev.ProjectKey) + len(ev.Type) + len(ev.EntityType) + len(ev.EntityID) +
		len(ev.EntityKey) + len(ev.ActorKind) + len(ev.ActorSubject) + 128
}

// itemBytes is what an item holds: itself, its event while it keeps it (else the strings it
// keeps of it), its bodies.
func itemBytes(it *item) int {
	n := itemOverhead
	if ev := it.ev.Load(); ev != nil {
		n += eventBytes(ev)
	} else {
		n += len(it.typ) + len(it.project) + len(it.key)
	}
	for i := range it.body {
		if p := it.body[i].Load(); p != nil {
			n += len(*p) + bodyOverhead
		}
	}
	return n
}

// itemOverhead is what an item counts beside its event and bodies: the item, its place in the
// ring and in its streams' indexes. bodyOverhead is a body's beside its bytes.
const (
	itemOverhead = 128
	bodyOverhead = 24
)

// streamsOf returns the streams an event belongs to: its project's, and its item's.
func streamsOf(ev *Event) (Stream, Stream, bool) {
	p := Stream{Kind: StreamProject, Key: ev.ProjectKey}
	if ev.EntityType == "item" && ev.EntityKey != "" {
		return p, Stream{Kind: StreamItem, Key: ev.EntityKey}, true
	}
	return p, Stream{}, false
}

// heldBytes is what the window holds now.
func (w *window) heldBytes() int { return int(w.bytes.Load()) }

// body returns the item's body in c, encoding it on first use: from its event while it keeps it,
// else transcoded from its other body. Concurrent callers may both encode; one body is kept,
// and the event is let go once the bodies carry it. An item that left the window keeps no
// new body: it is not counted any more.
func (w *window) body(it *item, c codec.Codec) ([]byte, error) {
	i := codecIndex(c)
	if b := it.body[i].Load(); b != nil {
		return *b, nil
	}
	var b []byte
	var err error
	ev := it.ev.Load()
	if ev != nil {
		b, err = c.Marshal(wireEvent(ev))
	} else if p := it.body[i].Load(); p != nil {
		return *p, nil // stored by who let the event go
	} else {
		b, err = transcodeBody(c, *it.body[1-i].Load())
	}
	if err != nil {
		return nil, err
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if it.gone {
		return b, nil
	}
	if !it.body[i].CompareAndSwap(nil, &b) {
		return *it.body[i].Load(), nil
	}
	n := len(b) + bodyOverhead
	if ev != nil && it.bodiesCarry(ev) && it.ev.CompareAndSwap(ev, nil) {
		n += len(it.typ) + len(it.project) + len(it.key) - eventBytes(ev)
	}
	w.bytes.Add(int64(n))
	return b, nil
}

// dropOldestLocked forgets the oldest event held.
func (w *window) dropOldestLocked() {
	it := w.ring[w.start]
	w.floor = it.seq
	w.bytes.Add(-int64(itemBytes(it)))
	it.gone = true
	p, s, both := it.streams()
	w.unindexLocked(p, it)
	if both {
		w.unindexLocked(s, it)
	}
	w.ring[w.start] = nil
	w.start = (w.start + 1) % len(w.ring)
	w.n--
}

func (w *window) unindexLocked(s Stream, it *item) {
	si := w.index[s]
	if si == nil || si.head >= len(si.items) || si.items[si.head] != it {
		return // cannot be: the stream's oldest event is the window's oldest of the stream
	}
	si.items[si.head] = nil
	si.head++
	si.evicted = it.seq
	switch {
	case si.head == len(si.items) && si.subs == 0:
		delete(w.index, s)
	case si.head == len(si.items):
		si.items, si.head = si.items[:0], 0
	case si.head >= 64 && si.head*2 >= len(si.items):
		n := copy(si.items, si.items[si.head:])
		clear(si.items[n:])
		si.items, si.head = si.items[:n], 0
	}
}

func (w *window) indexLocked(s Stream, it *item) {
	si := w.index[s]
	if si == nil {
		si = &streamItems{since: w.floor}
		w.index[s] = si
	}
	si.items = append(si.items, it)
}

// retain keeps what the window knows of s while a subscription of s is registered.
func (w *window) retain(s Stream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.index == nil {
		w.index = make(map[Stream]*streamItems)
	}
	si := w.index[s]
	if si == nil {
		si = &streamItems{since: w.floor}
		if w.ring == nil {
			si.since = -1 // until the first event: then it is the window's floor
		}
		w.index[s] = si
	}
	si.subs++
}

// release undoes a retain.
func (w *window) release(s Stream) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if si := w.index[s]; si != nil {
		si.subs--
		if si.subs <= 0 && len(si.live()) == 0 {
			delete(w.index, s)
		}
	}
}

// forgetLocked drops every event and starts what the window knows of its streams again from
// floor: a reset log, or the window's first events.
func (w *window) forgetLocked() {
	for i := range w.n {
		w.ring[(w.start+i)%len(w.ring)].gone = true
	}
	clear(w.ring)
	w.start, w.n = 0, 0
	w.bytes.Store(0)
	for s, si := range w.index {
		if si.subs <= 0 {
			delete(w.index, s)
			continue
		}
		clear(si.items)
		*si = streamItems{items: si.items[:0], subs: si.subs, since: w.floor}
	}
}

// gapLocked reports whether events of s after seq may have left the window.
func (w *window) gapLocked(s Stream, seq int64) bool {
	if seq >= w.floor {
		return false
	}
	si := w.index[s]
	return si == nil || si.since < 0 || seq < si.since || seq < si.evicted
}

// add records dispatched events, in seq order, encoding each in the codecs of enc (by
// codecIndex) before any subscriber pulls it; an item keeps its event only when the bodies
// do not carry it.
func (w *window) add(evs []Event, enc [2]bool) {
	if len(evs) == 0 {
		return
	}
	// One allocation each, not one for the run: an item the window lets go is collected
	// without waiting for the rest of its run.
	items := make([]*item, len(evs))
	size := make([]int, len(evs))
	for i := range evs {
		ev := &evs[i]
		it := newItem(ev)
		items[i] = it
		var we *WireEvent
		for c, on := range enc {
			if !on {
				continue
			}
			cd := codec.JSON
			if c == 1 {
				cd = codec.MsgPack
			}
			if we == nil {
				we = wireEvent(ev)
			}
			if b, err := cd.Marshal(we); err == nil {
				it.body[c].Store(&b)
			}
		}
		if !it.bodiesCarry(ev) {
			kept := *ev
			it.ev.Store(&kept)
		}
		size[i] = itemBytes(it)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.index == nil {
		w.index = make(map[Stream]*streamItems)
	}
	switch {
	case w.ring == nil:
		if w.events <= 0 {
			w.events = windowEvents
		}
		w.ring = make([]*item, w.events)
		w.floor = evs[0].Seq - 1
		w.forgetLocked()
	case evs[0].Seq <= w.last:
		// Seqs went backwards (a reset log): start over.
		w.resets++
		w.floor = evs[0].Seq - 1
		w.forgetLocked()
	case w.n == 0:
		w.floor = max(w.floor, evs[0].Seq-1)
	}
	budget := int64(w.maxBytes)
	for i, it := range items {
		b := int64(size[i])
		for w.n > 0 && (w.n == len(w.ring) || w.bytes.Load()+b > budget) {
			w.dropOldestLocked()
		}
		if b > budget { // larger than the whole budget: not held, and nothing before it
			w.floor, w.last = it.seq, it.seq
			p, s, both := it.streams()
			if si := w.index[p]; si != nil {
				si.evicted = it.seq
			}
			if si := w.index[s]; both && si != nil {
				si.evicted = it.seq
			}
			continue
		}
		it.epoch = w.resets
		w.ring[(w.start+w.n)%len(w.ring)] = it
		w.n++
		w.bytes.Add(b)
		w.last = it.seq
		p, s, both := it.streams()
		w.indexLocked(p, it)
		if both {
			w.indexLocked(s, it)
		}
	}
}

// next appends to out the events of s after seq, at most max of them. gap reports that
// events of s after seq may have left the window already (seq is below its floor): the
// caller reads them from the log instead, up to floor.
func (w *window) next(s Stream, seq int64, out []*item, max int) (_ []*item, more, gap bool, floor int64) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.gapLocked(s, seq) {
		return out, false, true, w.floor
	}
	si := w.index[s]
	if si == nil {
		return out, false, false, w.floor
	}
	l := si.live()
	i := si.after(seq)
	end := min(len(l), i+max)
	out = append(out, l[i:end]...)
	return out, end < len(l), false, w.floor
}

// has reports whether the window has an event of s after seq, or may have lost one.
func (w *window) has(s Stream, seq int64) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.gapLocked(s, seq) {
		return true
	}
	si := w.index[s]
	return si != nil && si.after(seq) < len(si.live())
}

// count returns how many events of s have from < seq <= to and how many of those types
// selects, when the window holds every event of that range (ok); limit caps the first count,
// past which the caller only needs to know there are more.
func (w *window) count(s Stream, from, to int64, types *TypeFilter, limit int) (n, selected int, ok bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.ring == nil || to > w.last || w.gapLocked(s, from) {
		return 0, 0, false
	}
	si := w.index[s]
	if si == nil {
		return 0, 0, true
	}
	l := si.live()
	for i := si.after(from); i < len(l) && l[i].seq <= to && n < limit; i++ {
		n++
		if types.Match(l[i].typ) {
			selected++
		}
	}
	return n, selected, true
}

// position returns the seq of the last dispatched event (0 before any).
func (w *window) position() int64 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.last
}
