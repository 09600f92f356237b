package streams

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

// Pages of events read from the log (a catch-up's, or a replay's first) are held by their
// subscriptions until their connections pull them. A subscription holds one page at a time,
// but a connection that stops reading once its catch-ups have read keeps each of its
// subscriptions' pages: 256 of them, 64 MiB. The replica's pages together are bounded by
// HubOptions.CatchUpBytes. Before a catch-up reads, it reserves a page's bytes, letting go of
// the pages read from least recently until one fits; while each page was read from within
// pageGrace (its reader is reading it, or may be about to), the catch-up waits, holding no turn
// of CatchUps. A page
// always fits when nothing else is held or being read. A replay's first page, read while its
// subscribe waits, is not made to wait: the pages read from least recently make room after it. A page let
// go is read again from the log once its subscription is pulled: its position did not move, so
// nothing is lost or repeated; the reader that stopped pays a read, not the replica's memory.
//
// A page's bytes are its events' (eventBytes), counted from when it is handed to its
// subscription until it is sent or let go. A page may pass its reservation by its first event
// (a page is at most catchUpPageBytes but for its first event), and replays' first pages may
// pass the bound for pageGrace.

// pageBudget is the hub's account of the pages its subscriptions hold.
type pageBudget struct {
	max     int64
	grace   time.Duration // pageGrace unless a test sets it
	bytes   atomic.Int64
	dropped atomic.Int64
	// held is the pages held, as pageRefs, the one read from least recently first; mu guards it
	// and Subscription.pageElem.
	mu   sync.Mutex
	held list.List
}

// pageRef is a page in pageBudget.held: which subscription holds it, and which of its pages.
type pageRef struct {
	sub *Subscription
	gen uint64
	at  time.Time // when it was handed to sub, or last read from
}

const (
	// pageGrace is how long a page is held before it may be let go for another.
	pageGrace = 200 * time.Millisecond
	// pageWait is how long a catch-up waits before it looks again for room for its page.
	pageWait = 10 * time.Millisecond
)

// holdPageLocked counts s's page, s.behind (s.mu held), in the hub's pages, in place of the
// reserved bytes counted for it.
func (s *Subscription) holdPageLocked(reserved int64) {
	h := s.hub
	n := 0
	for i := range s.behind {
		n += eventBytes(&s.behind[i])
	}
	s.pageGen++
	s.pageBytes = n
	h.pages.bytes.Add(int64(n) - reserved)
	h.pages.mu.Lock()
	s.pageElem = h.pages.held.PushBack(pageRef{sub: s, gen: s.pageGen, at: time.Now()})
	h.pages.mu.Unlock()
}

// touchPageLocked notes that s's page is being read (s.mu held): it is the last to be let go.
func (s *Subscription) touchPageLocked() {
	h := s.hub
	h.pages.mu.Lock()
	if e := s.pageElem; e != nil {
		e.Value = pageRef{sub: s, gen: s.pageGen, at: time.Now()}
		h.pages.held.MoveToBack(e)
	}
	h.pages.mu.Unlock()
}

// releasePageLocked stops counting s's page (s.mu held): sent, let go or closed.
func (s *Subscription) releasePageLocked() {
	h := s.hub
	if s.pageBytes != 0 {
		h.pages.bytes.Add(-int64(s.pageBytes))
		s.pageBytes = 0
	}
	h.pages.mu.Lock()
	if s.pageElem != nil {
		h.pages.held.Remove(s.pageElem)
		s.pageElem = nil
	}
	h.pages.mu.Unlock()
}

// reserve counts need bytes for a page about to be read, once they fit in the budget, letting
// go of the pages read from least recently, and not within the grace, to make room; it reports whether it
// did. A page always fits when nothing else is held or reserved.
func (h *Hub) reserve(need int64) bool {
	for {
		cur := h.pages.bytes.Load()
		if cur == 0 || cur+need <= h.pages.max {
			if h.pages.bytes.CompareAndSwap(cur, cur+need) {
				return true
			}
			continue
		}
		if !h.dropOldest() {
			return false // pages being read, or held too briefly: wait
		}
	}
}

// trimPages lets go of the pages read from least recently, and not within the grace, while the pages held
// pass the budget. It is called holding no subscription's lock.
func (h *Hub) trimPages() {
	for h.pages.bytes.Load() > h.pages.max && h.dropOldest() {
	}
}

// dropOldest lets go of the page read from least recently, if not within the grace; it reports
// whether there was one.
func (h *Hub) dropOldest() bool {
	h.pages.mu.Lock()
	e := h.pages.held.Front()
	if e == nil || time.Since(e.Value.(pageRef).at) < h.pages.grace {
		h.pages.mu.Unlock()
		return false
	}
	ref := h.pages.held.Remove(e).(pageRef)
	ref.sub.pageElem = nil
	h.pages.mu.Unlock()
	ref.sub.dropPage(ref.gen)
	return true
}

// dropPage lets go of s's page gen, if s still holds it: s is read from the log again from its
// position once its connection pulls it.
func (s *Subscription) dropPage(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pageGen != gen || s.behind == nil || s.state == subClosed {
		return
	}
	s.behind, s.behindTo = nil, 0
	s.releasePageLocked()
	s.hub.pages.dropped.Add(1)
}

// waitRoom waits, holding no turn of CatchUps, until a page fits in the hub's budget, and
// reserves it (the caller counts the page it reads in its place, or gives it back). It
// reports false, having ended s's catch-up, when the hub closes or s is no longer catching up.
func (h *Hub) waitRoom(s *Subscription) bool {
	for !h.reserve(catchUpPageBytes) {
		if !s.catchingUp() || !h.pause(s, pageWait) {
			return false
		}
	}
	return true
}

// CatchUpBytes returns what the pages read from the log and not yet sent take now.
func (h *Hub) CatchUpBytes() int64 { return h.pages.bytes.Load() }

// CatchUpPagesDropped returns how many pages read from the log were let go before they were
// sent, to keep the pages within HubOptions.CatchUpBytes.
func (h *Hub) CatchUpPagesDropped() int64 { return h.pages.dropped.Load() }
