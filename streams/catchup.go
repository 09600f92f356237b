package streams

import (
	"context"
	"slices"
	"time"
)

// A subscription whose position fell behind the window (its reader was slower than the
// window's turnover) catches up from the log: it reads the stream's events from its position
// to the window's floor, and its connection pulls them before the window's. It is closed with
// ReasonLagging instead, on a connection that stays open, when more than the hub's
// CatchUpLimit events lie there, or when the log cannot be read: the client subscribes again
// with from_seq, as the Realtime API says. The events of a replay from the log not sent yet
// do not count: the replay limit admitted them.
//
// Catch-ups read the log at most HubOptions.CatchUps at a time for the replica, and each keeps
// one page: at most catchUpPage events and about catchUpPageBytes. A long way behind is caught
// up a page at a time, each page read once the one before was sent, so that what a catch-up
// holds does not grow with the distance, nor with the events' size, nor with readers that stop
// again; Pull lets go of each event of a page as it sends it. A Log that is a Counter is asked
// how far behind the subscription is first, so that only a page is ever read. The CatchUp hook
// (its subject's replay budget) paces the pages: while it says to wait, the next page waits
// for its read, holding no turn of CatchUps, and Hub.Close ends the wait.

// Pages of a catch-up, and of a replay from the log.
const (
	// catchUpPage is the most events one page holds.
	catchUpPage = 64
	// catchUpPageBytes bounds a page's events (eventBytes), but for its first event.
	catchUpPageBytes = 256 << 10
	// catchUpFirstRead is the events a subscription's first read asks for, before it knows
	// their size; the next reads are sized from the events of the last (cutPage).
	catchUpFirstRead = 8
)

// catchUpTimeout bounds one catch-up's reads of the log.
const catchUpTimeout = 10 * time.Second

// headPoll is how often a catch-up reads the head of a log that does not yet show the events
// the tailer dispatched (a standby behind the primary): often enough that the wait adds little
// to the standby's own lag, seldom enough that waiting catch-ups load it little.
const headPoll = 10 * time.Millisecond

// throttleCheck is the longest a catch-up waiting for its subject's budget goes without
// looking whether its subscription is still open.
const throttleCheck = time.Second

// pageLen returns how many of the first events of evs make a page: at most catchUpPage, and
// those that fit in catchUpPageBytes, at least one.
func pageLen(evs []Event) int {
	n, size := 0, 0
	for n < min(len(evs), catchUpPage) {
		b := eventBytes(&evs[n])
		if n > 0 && size+b > catchUpPageBytes {
			break
		}
		size += b
		n++
	}
	return n
}

// keepPage returns the first n events of evs, in a slice of their own when they are not all
// of them: those left out are not kept alive with the page.
func keepPage(evs []Event, n int) []Event {
	if n < len(evs) {
		return slices.Clone(evs[:n])
	}
	return evs
}

// cutPage returns the page of evs, read asking for limit events; more reports that events may
// follow it (limit were read, or some left out), and next is how many the next read asks for:
// as many as fit in a page at the size of these, at most twice limit and catchUpPage, as the
// tailer sizes its batches.
func cutPage(evs []Event, limit int) (page []Event, more bool, next int) {
	n := pageLen(evs)
	total := 0
	for i := range evs {
		total += eventBytes(&evs[i])
	}
	next = limit
	if total > 0 {
		next = max(1, min(int(int64(len(evs))*catchUpPageBytes/int64(total)), 2*limit, catchUpPage))
	}
	return keepPage(evs, n), n < len(evs) || len(evs) >= limit, next
}

// startCatchUpLocked moves s (live, mu held) to catching up from its position to floor,
// on a goroutine of the hub.
func (s *Subscription) startCatchUpLocked(floor int64) {
	s.state = subCatchingUp
	s.ready.Store(false)
	h := s.hub
	h.catchUpsRunning.Add(1)
	h.wg.Add(1)
	go h.catchUp(s, s.last, floor, s.nextRead)
}

// catchUp reads s's events in (from, to] from the log, asking for limit of them, and hands the
// first page of them to s, or closes s lagging.
func (h *Hub) catchUp(s *Subscription, from, to int64, limit int) {
	defer h.wg.Done()
	defer h.catchUpsRunning.Add(-1)
	if !h.throttle(s) || !h.waitRoom(s) {
		return
	}
	reserved := int64(catchUpPageBytes)
	defer func() { h.pages.bytes.Add(-reserved) }() // the page was not read, or not held
	select {
	case h.catchUps <- struct{}{}:
	case <-h.ctx.Done():
		h.endCatchUp(s, "")
		return
	}
	evs, behind, err := h.readBehind(s, from, to, limit)
	<-h.catchUps
	if err == nil && s.catchUp != nil {
		s.catchUp(len(evs))
	}
	reason := ""
	switch {
	case err != nil:
		if h.ctx.Err() != nil {
			h.endCatchUp(s, "")
			return
		}
		reason = ReasonLagging
	case behind > h.catchUpLimit:
		reason = ReasonLagging
	}
	if h.onCatchUp != nil {
		h.onCatchUp(reason == "")
	}
	if reason != "" {
		h.endCatchUp(s, reason)
		return
	}
	upto := to
	evs, more, next := cutPage(evs, limit)
	if more {
		// The rest is read again once this page is sent. (Not the count: a count made on a
		// standby behind the one read may be short.)
		upto = evs[len(evs)-1].Seq
	}
	if evs == nil {
		evs = []Event{} // none: the position still moves to upto
	}
	s.mu.Lock()
	if s.state != subCatchingUp {
		s.mu.Unlock()
		return
	}
	s.behind, s.behindTo, s.nextRead, s.state = evs, upto, next, subLive
	s.holdPageLocked(reserved)
	reserved = 0
	s.mu.Unlock()
	s.wake()
}

// throttle waits, holding no turn of CatchUps, while s's CatchUp hook says its subject's
// replay budget is overdrawn. It reports false, having ended s's catch-up, when the hub
// closes or s is no longer catching up.
func (h *Hub) throttle(s *Subscription) bool {
	if s.catchUp == nil {
		return true
	}
	for {
		if !s.catchingUp() {
			return false
		}
		d := s.catchUp(0)
		if d <= 0 {
			return true
		}
		if !h.pause(s, min(d, throttleCheck)) {
			return false
		}
	}
}

// pause waits d, holding no turn of CatchUps; it reports false, having ended s's catch-up, when
// the hub closes first.
func (h *Hub) pause(s *Subscription, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-h.ctx.Done():
		h.endCatchUp(s, "")
		return false
	}
}

func (s *Subscription) catchingUp() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == subCatchingUp
}

// readBehind returns how many of the stream's events lie in (from, to] (up to one more than
// the hub's CatchUpLimit; those of a replay not sent yet left out) and, unless that is too
// many, the first limit of them, once the log shows every event up to to (a log read from a
// standby may lag what the tailer dispatched). A log that is not a Counter is read to count.
func (h *Hub) readBehind(s *Subscription, from, to int64, limit int) (evs []Event, behind int, err error) {
	ctx, cancel := context.WithTimeout(h.ctx, catchUpTimeout)
	defer cancel()
	for {
		head, err := s.log.Head(ctx)
		if err != nil {
			return nil, 0, err
		}
		if head >= to {
			break
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(headPoll):
		}
	}
	if since := max(from, s.replayHead); since < to {
		if c, ok := s.log.(Counter); ok {
			behind, err = c.CountStream(ctx, s.stream, since, to, h.catchUpLimit+1)
		} else {
			var all []Event
			all, err = s.log.ReadStream(ctx, s.stream, since, to, h.catchUpLimit+1)
			behind = len(all)
		}
		if err != nil || behind > h.catchUpLimit {
			return nil, behind, err
		}
	}
	evs, err = s.log.ReadStream(ctx, s.stream, from, to, limit)
	return evs, behind, err
}

// endCatchUp closes s with reason ("" when the hub is closing: nobody is told).
func (h *Hub) endCatchUp(s *Subscription, reason string) {
	s.mu.Lock()
	if s.state != subCatchingUp {
		s.mu.Unlock()
		return
	}
	s.closeLocked(reason)
	s.mu.Unlock()
	h.remove(s)
	s.notifyClosed()
}
