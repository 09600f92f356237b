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
// distance, nor with readers that stop again.

// catchUpPage is the most events one catch-up keeps for its connection to pull.
const catchUpPage = 256

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
	evs, err := h.readBehind(s, from, to)
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
	case len(evs) > s.replayLimit:
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
	if len(evs) > catchUpPage {
		// The rest is read again once this page is sent.
		upto = evs[catchUpPage-1].Seq
		evs = evs[:catchUpPage:catchUpPage]
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

// readBehind reads the stream's events in (from, to], at most one more than ReplayLimit,
// once the log shows every event up to to (a log read from a standby may lag what the
// tailer dispatched).
func (h *Hub) readBehind(s *Subscription, from, to int64) ([]Event, error) {
	ctx, cancel := context.WithTimeout(h.ctx, catchUpTimeout)
	defer cancel()
	for {
		head, err := s.log.Head(ctx)
		if err != nil {
			return nil, err
		}
		if head >= to {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return s.log.ReadStream(ctx, s.stream, from, to, s.replayLimit+1)
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
