package presence

import (
	"context"
	"slices"
	"time"
)

// The registry's work runs on one goroutine that exists only while work is due: it writes
// this replica's changed counts to the store (at most once per window), reads the streams
// other replicas changed, refreshes the views of the streams due, and delivers the notices.
// When nothing is due it arms a timer for the next work and ends.

// leaveGrace is how many windows a member must be missing before it is reported left.
const leaveGrace = 2

// delivery is one notice for one presence subscription.
type delivery struct {
	p *Presence
	n *Notice
}

// wantLocked makes sure work due at at gets done: it starts the worker when at has come, or
// arms the timer for at unless it is armed earlier. It costs the same however much work is
// scheduled: the worker scans the schedule, once per run.
func (r *Registry) wantLocked(at time.Time) {
	if r.closed || r.running {
		return // a running worker looks at the schedule again before it ends
	}
	d := time.Until(at)
	if d <= 0 {
		r.running = true
		r.wg.Add(1)
		go r.work()
		return
	}
	if !r.armedAt.IsZero() && !at.Before(r.armedAt) {
		return
	}
	r.armedAt = at
	if r.timer == nil {
		r.timer = time.AfterFunc(d, r.wake)
	} else {
		r.timer.Reset(d)
	}
}

func (r *Registry) wake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armedAt = time.Time{}
	if next, ok := r.nextLocked(); ok {
		r.wantLocked(next)
	}
}

// nextLocked returns when the next work is due.
func (r *Registry) nextLocked() (time.Time, bool) {
	var next time.Time
	ok := len(r.dirty) > 0
	if ok {
		next = r.flushAt
	}
	for st := range r.scheduled {
		if !ok || st.due.Before(next) {
			next, ok = st.due, true
		}
	}
	return next, ok
}

func (r *Registry) work() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		if r.closed {
			r.running = false
			r.mu.Unlock()
			return
		}
		now := time.Now()
		var counts []Count
		if len(r.dirty) > 0 && !now.Before(r.flushAt) {
			counts = r.takeDirtyLocked()
			r.flushAt = now.Add(r.window)
		}
		var due []*streamState
		var toRead []string
		for st := range r.scheduled {
			if st.due.After(now) {
				continue
			}
			due = append(due, st)
			delete(r.scheduled, st)
			st.due = time.Time{}
			if st.stale {
				toRead = append(toRead, st.name)
				st.stale, st.reading = false, true
			}
		}
		if counts == nil && len(due) == 0 {
			r.running = false
			if next, ok := r.nextLocked(); ok {
				r.wantLocked(next)
			}
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()

		flushErr := r.flush(counts)
		remote, readErr := r.read(toRead)
		r.mu.Lock()
		now = time.Now()
		if flushErr != nil {
			for _, c := range counts {
				r.dirty[key{c.Stream, c.Subject}] = struct{}{}
			}
			r.flushAt = now.Add(retryAfter)
		}
		r.noteStoreLocked(flushErr, readErr)
		var out []delivery
		for _, st := range due {
			if st.gone {
				continue
			}
			if st.reading {
				st.reading = false
				if readErr != nil {
					// Refreshed with what was read before; read again later.
					st.stale = true
					r.scheduleLocked(st, now.Add(retryAfter))
				} else {
					st.remote = remote[st.name]
				}
			}
			if len(st.watchers) == 0 {
				continue // the last watcher left meanwhile
			}
			out = r.refreshLocked(st, now, out)
		}
		r.mu.Unlock()
		deliver(out)
	}
}

// takeDirtyLocked returns this replica's counts that changed since the last flush.
func (r *Registry) takeDirtyLocked() []Count {
	counts := make([]Count, 0, len(r.dirty))
	for k := range r.dirty {
		n := 0
		if st := r.streams[k.stream]; st != nil {
			n = len(st.local[k.subject])
		}
		counts = append(counts, Count{Stream: k.stream, Subject: k.subject, Connections: n})
	}
	clear(r.dirty)
	return counts
}

func (r *Registry) flush(counts []Count) error {
	if len(counts) == 0 || r.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return r.store.Flush(ctx, counts)
}

func (r *Registry) read(streams []string) (map[string]map[string]int, error) {
	if len(streams) == 0 || r.store == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return r.store.Read(ctx, streams, r.max)
}

// noteStoreLocked logs the store's failures when they begin and when they end.
func (r *Registry) noteStoreLocked(flushErr, readErr error) {
	err := flushErr
	if err == nil {
		err = readErr
	}
	switch {
	case err != nil && !r.failing:
		r.failing = true
		r.logger.Warn("presence: the shared store failed; retrying every second", "err", err)
	case err == nil && r.failing:
		r.failing = false
		r.logger.Info("presence: the shared store answers again")
	}
}

// refreshLocked brings st's view up to date at now and appends what its watchers must hear:
// the change to those that had their snapshot, the snapshot to the others. A member found
// missing is reported left only once it has been missing for two windows: one that comes
// back within a window produces nothing, also when it comes back on another replica, whose
// write to the store may wait up to a window behind its previous one.
func (r *Registry) refreshLocked(st *streamState, now time.Time, out []delivery) []delivery {
	st.lastRefresh = now
	members := merge(st.local, st.remote)
	if len(members) > r.max {
		members = members[:r.max]
	}
	present := make(map[string]bool, len(members))
	var joined, left []string
	for _, m := range members {
		present[m.Subject] = true
		if _, ok := st.view[m.Subject]; !ok {
			joined = append(joined, m.Subject)
		}
		st.view[m.Subject] = time.Time{}
	}
	var recheck time.Time
	for subject, missing := range st.view {
		if present[subject] {
			continue
		}
		if missing.IsZero() {
			missing = now
			st.view[subject] = now
		}
		if at := missing.Add(leaveGrace * r.window); !now.Before(at) {
			delete(st.view, subject)
			left = append(left, subject)
		} else if recheck.IsZero() || at.Before(recheck) {
			recheck = at
		}
	}
	if !recheck.IsZero() {
		r.scheduleLocked(st, recheck)
	}
	var change, snapshot *Notice
	if len(joined)+len(left) > 0 {
		slices.Sort(joined)
		slices.Sort(left)
		change = &Notice{Stream: st.name, Joined: joined, Left: left}
	}
	if st.unprimed > 0 {
		all := make([]string, 0, len(st.view))
		for subject := range st.view {
			all = append(all, subject)
		}
		slices.Sort(all)
		snapshot = &Notice{Stream: st.name, Joined: all}
	}
	for p := range st.watchers {
		switch {
		case !p.primed:
			p.primed = true
			st.unprimed--
			out = append(out, delivery{p, snapshot})
		case change != nil:
			out = append(out, delivery{p, change})
		}
	}
	return out
}

// deliver hands the notices to their sinks, with no registry lock held.
func deliver(out []delivery) {
	for _, d := range out {
		p := d.p
		p.mu.Lock()
		ok := p.closed || p.sink.PresenceChanged(d.n)
		if !ok {
			p.closed = true
		}
		p.mu.Unlock()
		if !ok {
			p.sink.PresenceLost()
		}
	}
}
