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

// keep renews the leases of the turns running here, stops those whose cancel was asked for
// through the store, and ends the turns of watched sessions whose replica died, every
// Lease/3, until ctx ends; now and then it expires old outputs and idempotency keys.
func (s *Service) keep(ctx context.Context) {
	defer close(s.keeperDone)
	tick := time.NewTicker(s.lease / 3)
	defer tick.Stop()
	lastExpiry := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.renew(ctx)
		s.reap(ctx)
		if time.Since(lastExpiry) >= expireEvery {
			lastExpiry = time.Now()
			s.expire(ctx)
		}
	}
}

// renew extends the leases of local turns. A turn whose lease is gone (another replica
// judged it dead) stops without a word: whoever took the lease over ended it for watchers.
// A turn whose lease carries a cancel request (planner.cancel on another replica, whose
// notification may have been lost) is cancelled. A turn that gave its lease back while it
// was being renewed is ending: its lease is not lost, and the turn publishes its done.
func (s *Service) renew(ctx context.Context) {
	s.mu.Lock()
	ts := make([]*turn, 0, len(s.turns))
	for _, t := range s.turns {
		if t.leased && !t.gaveBack {
			ts = append(ts, t)
		}
	}
	s.mu.Unlock()
	for _, t := range ts {
		if t.ctx.Err() != nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, s.lease/3)
		ok, cancelled, err := s.store.Renew(rctx, t.session.ID, t.owner, s.lease)
		cancel()
		s.mu.Lock()
		gaveBack := t.gaveBack
		s.mu.Unlock()
		if gaveBack {
			continue
		}
		switch {
		case err == nil && ok:
			t.renewedAt = time.Now()
			if cancelled {
				t.cancel(errCancelled)
			}
		case err == nil:
			s.logger.Warn("planner: a turn lost its lease", "session", t.session.ID)
			t.cancel(errLeaseLost)
		case time.Since(t.renewedAt) >= s.lease:
			s.logger.Warn("planner: a turn's lease could not be renewed in time", "session", t.session.ID, "err", err)
			t.cancel(errLeaseLost)
		default:
			s.logger.Warn("planner: renew lease", "session", t.session.ID, "err", err)
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
	for _, l := range leases {
		ok, err := s.store.ReleaseExpired(rctx, l)
		if err != nil {
			s.logger.Warn("planner: release expired lease", "session", l.Session, "err", err)
			continue
		}
		if ok {
			s.publishStale(ctx, l)
		}
	}
}

// publishStale ends, for watchers, the turn of an expired lease whose replica died: error
// and done follow the last output that turn gave out (its lease's Given), or stored.
func (s *Service) publishStale(ctx context.Context, l Lease) {
	s.logger.Warn("planner: a turn's replica stopped without ending it", "session", l.Session)
	s.obs.TurnEnded(DoneError, 0)
	turn := TurnOfOwner(l.Owner)
	ctx, span := s.startStale(ctx, l, turn)
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	last, err := s.store.LastOffset(ctx, l.Session, turn)
	if err != nil {
		s.logger.Warn("planner: last output of a dead turn", "session", l.Session, "err", err)
	}
	last = max(last, l.Given)
	batch := make([]queued, 2)
	for i, o := range []Output{{Type: OutputError, Text: StaleText}, {Type: OutputDone, Text: DoneError}} {
		o.Session, o.Turn, o.Offset = l.Session, turn, last+int64(i)+1
		batch[i] = queued{o: o, keep: keepOutput, size: len(o.Text) + 128}
	}
	s.write(batch)
}

// expire removes outputs past the resume window and idempotency keys past theirs.
func (s *Service) expire(ctx context.Context) {
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.store.ExpireOutputs(ectx, s.window, abandonedTurn); err != nil {
		s.logger.Warn("planner: expire outputs", "err", err)
	}
	if err := s.store.ExpireSends(ectx, SendKeyWindow); err != nil {
		s.logger.Warn("planner: expire idempotency keys", "err", err)
	}
}
