package planner

import (
	"context"
	"time"
)

// StaleText is the error text watchers get when the replica running a turn stopped without
// ending it.
const StaleText = "the planner stopped unexpectedly"

// expireEvery is how often a replica removes expired outputs and idempotency keys.
const expireEvery = time.Minute

// keep renews the leases of the turns running here and stops those whose cancel was asked
// for through the store, every Lease/3, until ctx ends. Beside it, reapEvery ends the turns
// of watched sessions whose replica died and now and then expires old outputs and idempotency
// keys: a slow reap never delays a renewal.
func (s *Service) keep(ctx context.Context) {
	defer close(s.keeperDone)
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		s.reapEvery(ctx)
	}()
	defer func() { <-reaped }()
	tick := time.NewTicker(s.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.renew(ctx)
	}
}

// reapEvery reaps every Lease/3 and expires every expireEvery, until ctx ends.
func (s *Service) reapEvery(ctx context.Context) {
	tick := time.NewTicker(s.lease / 3)
	defer tick.Stop()
	lastExpiry := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.reap(ctx)
		if time.Since(lastExpiry) >= expireEvery {
			lastExpiry = time.Now()
			s.expire(ctx)
		}
	}
}

// renew extends the leases of local turns, all in one write. A turn whose lease is gone
// (another replica judged it dead) stops without a word: whoever took the lease over ended it
// for watchers. A turn whose lease carries a cancel request (planner.cancel on another
// replica, whose notification may have been lost) is cancelled. A turn that gave its lease
// back while it was being renewed is ending: its lease is not lost, and the turn publishes its
// done. A renewal that fails keeps the turns running until Lease has passed since their last
// renewal began (their leases may have expired then), so a slow database delays turns rather
// than ending them.
func (s *Service) renew(ctx context.Context) {
	s.mu.Lock()
	ts := make([]*turn, 0, len(s.turns))
	for _, t := range s.turns {
		if t.leased && !t.gaveBack && t.ctx.Err() == nil {
			ts = append(ts, t)
		}
	}
	s.mu.Unlock()
	if len(ts) == 0 {
		return
	}
	leases := make([]Lease, len(ts))
	for i, t := range ts {
		leases[i] = Lease{Session: t.session.ID, Owner: t.owner}
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, s.lease/3)
	rs, err := s.store.Renew(rctx, leases, s.lease)
	cancel()
	if err != nil {
		s.logger.Warn("planner: renew leases", "turns", len(ts), "err", err)
	}
	for i, t := range ts {
		s.mu.Lock()
		gaveBack := t.gaveBack
		s.mu.Unlock()
		switch {
		case gaveBack:
		case err == nil && rs[i].Held:
			t.renewedAt = start // the store's expiry counts from no earlier than this
			if rs[i].Cancel {
				t.cancel(errCancelled)
			}
		case err == nil:
			s.logger.Warn("planner: a turn lost its lease", "session", t.session.ID)
			t.cancel(errLeaseLost)
		case time.Since(t.renewedAt) >= s.lease:
			s.logger.Warn("planner: a turn's lease could not be renewed in time", "session", t.session.ID, "err", err)
			t.cancel(errLeaseLost)
		}
	}
}

// reap ends the turns of watched sessions whose lease expired: of all replicas that notice,
// the one that removes the lease publishes error and done.
func (s *Service) reap(ctx context.Context) {
	s.mu.Lock()
	sessions := make([]string, 0, len(s.watches))
	for id := range s.watches {
		sessions = append(sessions, id)
	}
	s.mu.Unlock()
	s.reapSessions(ctx, sessions)
}

// reapSession is reap for one session, before a new turn takes it.
func (s *Service) reapSession(ctx context.Context, session string) {
	s.reapSessions(ctx, []string{session})
}

func (s *Service) reapSessions(ctx context.Context, sessions []string) {
	if len(sessions) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, s.lease/3)
	defer cancel()
	leases, err := s.store.Expired(rctx, sessions)
	if err != nil {
		s.logger.Warn("planner: look for expired leases", "err", err)
		return
	}
	if len(leases) == 0 {
		return
	}
	released, err := s.store.ReleaseExpired(rctx, leases)
	if err != nil {
		s.logger.Warn("planner: release expired leases", "leases", len(leases), "err", err)
		return
	}
	s.publishStale(ctx, released)
}

// publishStale ends, for watchers, the turns of expired leases whose replica died, in one
// write: each turn's error and done follow the last output it gave out (its lease's Given), or
// stored.
func (s *Service) publishStale(ctx context.Context, leases []Lease) {
	if len(leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	batch := make([]queued, 0, 2*len(leases))
	for _, l := range leases {
		s.logger.Warn("planner: a turn's replica stopped without ending it", "session", l.Session)
		s.obs.TurnEnded(DoneError, 0)
		turn := TurnOfOwner(l.Owner)
		_, span := s.startStale(ctx, l, turn)
		defer span.End()
		last, err := s.store.LastOffset(ctx, l.Session, turn)
		if err != nil {
			s.logger.Warn("planner: last output of a dead turn", "session", l.Session, "err", err)
		}
		last = max(last, l.Given)
		for i, o := range []Output{{Type: OutputError, Text: StaleText}, {Type: OutputDone, Text: DoneError}} {
			o.Session, o.Turn, o.Offset = l.Session, turn, last+int64(i)+1
			batch = append(batch, queued{o: o, keep: keepOutput, size: len(o.Text) + 128})
		}
	}
	s.write(batch)
}

// expire removes outputs past the resume window and idempotency keys past theirs.
func (s *Service) expire(ctx context.Context) {
	ectx, cancel := context.WithTimeout(ctx, expireTimeout)
	defer cancel()
	if err := s.store.ExpireOutputs(ectx, s.window, abandonedTurn); err != nil {
		s.logger.Warn("planner: expire outputs", "err", err)
	}
	if err := s.store.ExpireSends(ectx, SendKeyWindow); err != nil {
		s.logger.Warn("planner: expire idempotency keys", "err", err)
	}
}
