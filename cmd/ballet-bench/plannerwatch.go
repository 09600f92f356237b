package main

import (
	"strconv"
	"sync/atomic"
)

// watchSet is what the planner mode's watchers saw. Watcher k watches session k / perSession
// under the subscription id "p<k>"; only its connection's reader touches it until the run
// reads the results, after every reader stopped.
type watchSet struct {
	deltas     int // text deltas of each answer
	perSession int
	ws         []*watcher
	drop       func(watcher, n int) bool

	lat      histogram    // emit → watcher, per delta
	progress atomic.Int64 // outputs read, for the wait's progress
	dones    atomic.Int64
	firstNs  atomic.Int64 // first delta read
	lastNs   atomic.Int64 // last delta read
}

// watcher is one planner.watch.
type watcher struct {
	session int
	seen    []bool // by delta number
	got     int    // distinct deltas
	next    int    // one past the highest delta number seen
	dups    int64  // deltas seen again
	late    int64  // deltas seen after a higher one

	turn        string
	otherTurns  int64 // outputs of another turn than the first seen
	lastOffset  int64
	offsetGaps  int64 // offsets skipped
	offsetDups  int64 // outputs at or below an offset already seen
	textOutputs int64
	junk        int64 // text bytes that were no stamp
	errors      int64 // error outputs
	afterDone   int64 // outputs after done

	done       atomic.Bool
	doneReason string
	doneOffset int64
	closed     atomic.Pointer[string] // stream.closed's reason
}

func newWatchSet(sessions, perSession, deltas int, drop func(int, int) bool) *watchSet {
	s := &watchSet{deltas: deltas, perSession: perSession, drop: drop, ws: make([]*watcher, sessions*perSession)}
	for k := range s.ws {
		s.ws[k] = &watcher{session: k / perSession, seen: make([]bool, deltas)}
	}
	return s
}

// subID is watcher k's subscription id.
func subID(k int) string { return "p" + strconv.Itoa(k) }

// of returns the watcher of a subscription id, or nil.
func (s *watchSet) of(sub []byte) (int, *watcher) {
	if len(sub) < 2 || sub[0] != 'p' {
		return 0, nil
	}
	k, err := strconv.Atoi(string(sub[1:]))
	if err != nil || k < 0 || k >= len(s.ws) {
		return 0, nil
	}
	return k, s.ws[k]
}

// output records one planner.output read at now.
func (s *watchSet) output(fi *frameInfo, now int64) {
	k, w := s.of(fi.sub)
	if w == nil {
		return
	}
	s.progress.Add(1)
	if w.turn == "" {
		w.turn = fi.turn
	} else if fi.turn != w.turn {
		w.otherTurns++
		return
	}
	switch {
	case fi.offset <= w.lastOffset:
		w.offsetDups++
		return
	case fi.offset > w.lastOffset+1:
		w.offsetGaps += fi.offset - w.lastOffset - 1
	}
	w.lastOffset = fi.offset
	if w.done.Load() {
		w.afterDone++
		return
	}
	switch fi.outType {
	case "text":
		w.textOutputs++
		w.junk += int64(parseStamps(fi.text, func(n int, t int64) {
			if n >= s.deltas {
				w.junk++
				return
			}
			if s.drop != nil && s.drop(k, n) {
				return
			}
			if w.seen[n] {
				w.dups++
				return
			}
			w.seen[n] = true
			w.got++
			if n < w.next {
				w.late++
			}
			w.next = max(w.next, n+1)
			s.lat.record(now - t)
			s.firstNs.CompareAndSwap(0, now)
			s.lastNs.Store(now)
		}))
	case "error":
		w.errors++
	case "done":
		w.doneReason, w.doneOffset = fi.text, fi.offset
		w.done.Store(true)
		s.dones.Add(1)
	}
}

// closed records a stream.closed of a watch; it reports whether it was one.
func (s *watchSet) closed(fi *frameInfo) bool {
	_, w := s.of(fi.sub)
	if w == nil {
		return false
	}
	reason := fi.reason
	w.closed.Store(&reason)
	return true
}

// waiting counts the watchers still expecting their done.
func (s *watchSet) waiting() int {
	n := 0
	for _, w := range s.ws {
		if !w.done.Load() && w.closed.Load() == nil {
			n++
		}
	}
	return n
}

// watchTotals sums up the watchers against what the model emitted for each turn.
type watchTotals struct {
	expected, delivered, gaps, dups, late    int64
	offsetGaps, offsetDups, otherTurns       int64
	textOutputs, junk, errors, afterDone     int64
	noDone, badDone, closed, outputs, ending int            // outputs: the turns' highest offsets, summed
	closes                                   map[string]int // stream.closed by reason
}

func (s *watchSet) totals(emitted func(session int) int64) *watchTotals {
	t := &watchTotals{closes: map[string]int{}}
	outputs := map[int]int64{} // the highest offset any watcher of the session saw
	ending := map[int]bool{}   // sessions whose done a watcher heard
	for _, w := range s.ws {
		e := emitted(w.session)
		t.expected += e
		t.delivered += int64(w.got)
		t.gaps += max(e-int64(w.got), 0)
		t.dups += w.dups
		t.late += w.late
		t.offsetGaps += w.offsetGaps
		t.offsetDups += w.offsetDups
		t.otherTurns += w.otherTurns
		t.textOutputs += w.textOutputs
		t.junk += w.junk
		t.errors += w.errors
		t.afterDone += w.afterDone
		if reason := w.closed.Load(); reason != nil {
			t.closed++
			t.closes[*reason]++
		}
		switch {
		case !w.done.Load():
			t.noDone++
		case w.doneReason != "end_turn":
			t.badDone++
		}
		if w.done.Load() {
			ending[w.session] = true
		}
		outputs[w.session] = max(outputs[w.session], w.lastOffset)
	}
	for _, n := range outputs {
		t.outputs += int(n)
	}
	t.ending = len(ending)
	return t
}
