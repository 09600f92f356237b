package streams

import "sync"

// recentEvents keeps the last bodyCacheSize dispatched events, so that a
// replay of recent events (a reconnecting client, a reconnect storm) is
// served from memory instead of the log. The events are dispatched in seq
// order and the tailer dispatches every committed event after its
// position, so the ring holds every event with a seq in (floor, last].
type recentEvents struct {
	mu    sync.RWMutex
	ring  []Event // ring[seq-slot], n of them valid
	start int     // slot of the oldest event
	n     int
	floor int64 // every event after floor and up to last is held
	last  int64
	// bytes is what the held events take (eventBytes), at most maxBytes: the oldest go first.
	bytes, maxBytes int
}

// eventBytes is what an event held in memory counts: its payload, its strings, its fields.
func eventBytes(ev *Event) int {
	return len(ev.Payload) + len(ev.ProjectKey) + len(ev.Type) + len(ev.EntityType) + len(ev.EntityID) +
		len(ev.EntityKey) + len(ev.ActorKind) + len(ev.ActorSubject) + 128
}

func (r *recentEvents) heldBytes() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.bytes
}

// dropOldestLocked forgets the oldest event held.
func (r *recentEvents) dropOldestLocked() {
	r.floor = r.ring[r.start].Seq
	r.bytes -= eventBytes(&r.ring[r.start])
	r.ring[r.start] = Event{}
	r.start = (r.start + 1) % len(r.ring)
	r.n--
}

// add records dispatched events (called by Dispatch, in seq order).
func (r *recentEvents) add(evs []Event) {
	if len(evs) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ring == nil {
		r.ring = make([]Event, bodyCacheSize)
	}
	if r.n > 0 && evs[0].Seq <= r.last {
		// Seqs went backwards (a reset log): start over.
		clear(r.ring)
		r.start, r.n, r.bytes = 0, 0, 0
	}
	if r.n == 0 {
		r.floor = evs[0].Seq - 1
	}
	budget := r.maxBytes
	if budget <= 0 {
		budget = DefaultRecentBytes
	}
	for i := range evs {
		b := eventBytes(&evs[i])
		for r.n > 0 && (r.n == len(r.ring) || r.bytes+b > budget) {
			r.dropOldestLocked()
		}
		if b > budget { // larger than the whole budget: not held, and nothing before it
			r.floor, r.last = evs[i].Seq, evs[i].Seq
			continue
		}
		r.ring[(r.start+r.n)%len(r.ring)] = evs[i]
		r.n++
		r.bytes += b
		r.last = evs[i].Seq
	}
}

// read returns the events of s with from < seq <= to, at most limit of
// them, and whether the ring holds every event of that range; when it
// does not, the caller reads the log.
func (r *recentEvents) read(s Stream, from, to int64, limit int) ([]Event, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.n == 0 || from < r.floor || to > r.last {
		return nil, false
	}
	// Binary search for the first event after from (seqs increase, with
	// gaps where no event was committed).
	lo, hi := 0, r.n
	for lo < hi {
		mid := (lo + hi) / 2
		if r.ring[(r.start+mid)%len(r.ring)].Seq <= from {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	var out []Event
	for i := lo; i < r.n && len(out) < limit; i++ {
		ev := &r.ring[(r.start+i)%len(r.ring)]
		if ev.Seq > to {
			break
		}
		if s.Matches(ev) {
			out = append(out, *ev)
		}
	}
	return out, true
}

// position returns the seq of the last dispatched event (0 before any).
func (r *recentEvents) position() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.last
}
