package planner

import (
	"context"
	"time"
)

// StaleText is the error text watchers get when the replica running a turn stopped without
// ending it.
const StaleText = "the planner stopped unexpectedly"

// keep renews the leases of the turns running here and ends the turns of watched sessions
// whose replica died, every Lease/3, until ctx ends.
func (s *Service) keep(ctx context.Context) {
	defer close(s.keeperDone)
	tick := time.NewTicker(s.lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.renew(ctx)
		s.reap(ctx)
	}
}

// renew extends the leases of local turns. A turn whose lease is gone (another replica
// judged it dead) stops without a word: whoever took the lease over ended it for watchers.
func (s *Service) renew(ctx context.Context) {
	s.mu.Lock()
	ts := make([]*turn, 0, len(s.turns))
	for _, t := range s.turns {
		if t.leased {
			ts = append(ts, t)
		}
	}
	s.mu.Unlock()
	for _, t := range ts {
		if t.ctx.Err() != nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, s.lease/3)
		ok, err := s.store.Renew(rctx, t.session.ID, t.owner, s.lease)
		cancel()
		switch {
		case err == nil && ok:
			t.renewedAt = time.Now()
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
			s.publishStale(l.Session)
		}
	}
}

// publishStale ends, for watchers, a turn whose replica died.
func (s *Service) publishStale(session string) {
	s.logger.Warn("planner: a turn's replica stopped without ending it", "session", session)
	s.obs.TurnEnded(DoneError, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, o := range []Output{{Session: session, Type: OutputError, Text: StaleText}, {Session: session, Type: OutputDone, Text: DoneError}} {
		if err := s.bus.Publish(ctx, Note{Session: session, Output: &o}); err != nil {
			s.logger.Warn("planner: publish output", "session", session, "err", err)
		}
	}
}
