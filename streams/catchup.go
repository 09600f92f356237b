package streams

import (
	"context"
	"time"
)

// A subscription whose position fell behind the window (its reader was slower than the
// window's turnover) catches up from the log: it reads the stream's events from its position
// to the window's floor, and its connection pulls them before the window's. It is closed with
// ReasonLagging instead, on a connection that stays open, when more than its ReplayLimit
// events lie there (the distance a client may replay), when its CatchUp hook refuses (the
// subject's replay budget), or when the log cannot be read: the client subscribes again with
// from_seq, as the Realtime API says.
//
// Catch-ups read the log at most HubOptions.CatchUps at a time for the replica, and each keeps
// at most catchUpPage events: a long way behind is caught up a page at a time, each page read
// once the one before was sent, so that what a catch-up holds does not grow with the
// distance, nor with readers that stop again. A Log that is a Counter is asked how far behind
// the subscription is first, so that only a page is ever read.

// catchUpPage is the most events one catch-up reads and keeps for its connection to pull.
const catchUpPage = 64

// catchUpTimeout bounds one catch-up's reads of the log.
const catchUpTimeout = 10 * time.Second

// startCatchUpLocked moves s (live, mu held) to catching up from its position to floor,
// on a goroutine of the hub.
func (s *Subscription) startCatchUpLocked(floor int64) {
	s.state = subCatchingUp
	s.ready.Store(false)
	h := s.hub
	h.catchUpsRunning.Add(1)
	h.wg.Add(1)
	go h.catchUp(s, s.last, floor)
}

// catchUp reads s's events in (from, to] from the log and hands the first page of them to
// s, or closes s lagging.
func (h *Hub) catchUp(s *Subscription, from, to int64) {
	defer h.wg.Done()
	defer h.catchUpsRunning.Add(-1)
	select {
	case h.catchUps <- struct{}{}:
	case <-h.ctx.Done():
		h.endCatchUp(s, "")
		return
	}
	evs, behind, err := h.readBehind(s, from, to)
	<-h.catchUps
	reason := ""
	switch {
	case err != nil:
		if h.ctx.Err() != nil {
			h.endCatchUp(s, "")
			return
		}
		reason = ReasonLagging
	case s.catchUp != nil && !s.catchUp(len(evs)):
		reason = ReasonLagging
	case behind > s.replayLimit:
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
	if evs == nil {
		evs = []Event{} // none: the position still moves to upto
	}
	if len(evs) >= catchUpPage {
		// A full page: the rest is read again once it is sent. (Not the count: a count
		// made on a standby behind the one read may be short.)
		evs = evs[:catchUpPage:catchUpPage]
		upto = evs[len(evs)-1].Seq
	}
	s.mu.Lock()
	if s.state != subCatchingUp {
		s.mu.Unlock()
		return
	}
	s.behind, s.behindTo, s.state = evs, upto, subLive
	s.mu.Unlock()
	s.wake()
}

// readBehind returns how many of the stream's events lie in (from, to] (up to one more than
// ReplayLimit) and, unless that is too many, the first of them, once the log shows every event
// up to to (a log read from a standby may lag what the tailer dispatched).
func (h *Hub) readBehind(s *Subscription, from, to int64) (evs []Event, behind int, err error) {
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
		case <-time.After(10 * time.Millisecond):
		}
	}
	c, ok := s.log.(Counter)
	if !ok {
		evs, err = s.log.ReadStream(ctx, s.stream, from, to, s.replayLimit+1)
		return evs, len(evs), err
	}
	if behind, err = c.CountStream(ctx, s.stream, from, to, s.replayLimit+1); err != nil || behind > s.replayLimit {
		return nil, behind, err
	}
	evs, err = s.log.ReadStream(ctx, s.stream, from, to, catchUpPage)
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
