package planner

import "context"

// A person's sends take their turns' leases one at a time on a replica, and none at all
// while this replica alone runs as many turns of theirs as Options.TurnsPerSubject allows.
// The store counts the person's turns on every replica under a lock of the person's; a flood
// of one person's sends would otherwise hold every connection of the store's pool waiting on
// that lock, and starve the lease renewals of every turn running here, of anyone's.

// subjectGate lets one of a person's sends at a time take a lease.
type subjectGate struct {
	token chan struct{} // holds one
	refs  int           // sends holding or waiting for it; under Service.mu
}

// enterGate waits for the subject's gate, or for ctx; the returned func leaves it.
func (s *Service) enterGate(ctx context.Context, subject string) (func(), error) {
	s.mu.Lock()
	if s.gates == nil {
		s.gates = map[string]*subjectGate{}
	}
	g := s.gates[subject]
	if g == nil {
		g = &subjectGate{token: make(chan struct{}, 1)}
		s.gates[subject] = g
	}
	g.refs++
	s.mu.Unlock()
	unref := func() {
		s.mu.Lock()
		if g.refs--; g.refs == 0 {
			delete(s.gates, subject)
		}
		s.mu.Unlock()
	}
	select {
	case g.token <- struct{}{}:
		return func() { <-g.token; unref() }, nil
	case <-ctx.Done():
		unref()
		return nil, ctx.Err()
	}
}

// atLimitHere reports whether the turns of subject that hold their leases here are already
// as many as TurnsPerSubject: the store would refuse another, and need not be asked.
func (s *Service) atLimitHere(subject string) bool {
	if s.turnsPer <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.turns {
		if t.human == subject && t.leased && !t.gaveBack {
			n++
		}
	}
	return n >= s.turnsPer
}

// refuseTurn is the refusal of a turn beyond TurnsPerSubject, counted.
func (s *Service) refuseTurn() error {
	s.obs.Refused(LimitTurns)
	return LimitReached(LimitTurns, s.turnsPer, 0)
}
