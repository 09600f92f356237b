// The auth and auth.refresh methods: token verification, the connection
// counted against its subject, the token's expiry.

package gateway

import (
	"context"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// verifyTimeout bounds checking one token, which may fetch the issuer's keys once (an HTTP
// round trip to the issuer): long enough for a slow issuer, short enough that an auth does not
// wait on a dead one for long.
const verifyTimeout = 10 * time.Second

func (s *session) verify(ctx context.Context, req *rpc.Request) (*auth.Principal, error) {
	var tp protocol.AuthParams
	if err := req.Decode(&tp); err != nil {
		return nil, err
	}
	if tp.Token == "" {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "params.token is required")
	}
	// Bounded by its own timeout, not the connection's context: a context
	// derived from that one would leave a table of children on it for the
	// connection's life.
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), verifyTimeout)
	defer cancel()
	p, err := s.srv.verifier.Verify(vctx, tp.Token)
	if err != nil {
		reason := auth.Reason(err)
		s.srv.metrics.AuthFailures.WithLabelValues(reason).Inc()
		s.logger().Info("token rejected", "method", req.Method, "reason", reason)
		return nil, rpc.Errorf(protocol.ErrUnauthenticated, "invalid token (%s)", reason)
	}
	return p, nil
}

func (s *session) auth(ctx context.Context, req *rpc.Request, _ *call) (any, error) {
	if err := s.checkAuthAddr(); err != nil {
		s.logger().Info("auth refused before verification: its address is beyond its rate", "rate", s.srv.cfg.AddrRate)
		s.refuse()
		req.AfterReply(func() { s.closeWith(StatusLimitExceeded, "too many failed authentications from this address") })
		return nil, err
	}
	p, err := s.verify(ctx, req)
	if err != nil {
		s.chargeAuthAddr()
		s.refuse()
		req.AfterReply(func() { s.closeWith(StatusUnauthenticated, "invalid token") })
		return nil, err
	}
	s.mu.Lock()
	if s.lifecycle() < stateFinishing {
		b, ok := s.srv.subjects.Acquire(p.Subject, s)
		if !ok {
			s.mu.Unlock()
			max := s.srv.cfg.MaxConnectionsPerSubject
			s.logger().Info("connection refused: too many connections of its subject", "subject", p.Subject, "max", max)
			s.refuse()
			req.AfterReply(func() { s.closeWith(StatusLimitExceeded, "too many connections of this subject") })
			return nil, s.srv.limitError(limitSubjectConns, max, 0)
		}
		s.counted = true
		s.budget.Store(b)
	}
	s.principal = p
	if s.lifecycle() == stateStarted { // else closing: it stays so
		s.advance(stateAuthed)
	}
	// Checked again with the principal set: a sign-out applied since Verify either is seen
	// here or finds this connection (CloseSubject).
	revoked := s.srv.revs.Check(p)
	s.mu.Unlock()
	if revoked != nil {
		reason := auth.Reason(revoked)
		s.srv.metrics.AuthFailures.WithLabelValues(reason).Inc()
		s.chargeAuthAddr()
		s.refuse()
		req.AfterReply(func() { s.closeWith(StatusUnauthenticated, "invalid token") })
		return nil, rpc.Errorf(protocol.ErrUnauthenticated, "invalid token (%s)", reason)
	}
	s.releaseAddr()
	s.setExpiry(p.ExpiresAt)
	s.logger().Info("authenticated", "human", p.Human)
	s.mu.Lock()
	if s.authTimer != nil {
		s.authTimer.Stop()
		s.authTimer = nil // an idle connection keeps only what it needs
	}
	s.mu.Unlock()
	return protocol.AuthResult{Subject: p.Subject, ExpiresAt: p.ExpiresAt.Unix(), Limits: s.srv.advertised()}, nil
}

func (s *session) refresh(ctx context.Context, req *rpc.Request, _ *call) (any, error) {
	p, err := s.verify(ctx, req)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	old := s.principal
	if p.Subject != old.Subject {
		s.mu.Unlock()
		s.srv.metrics.AuthFailures.WithLabelValues("subject_changed").Inc()
		return nil, rpc.Errorf(protocol.ErrUnauthenticated, "auth.refresh must keep the subject %q", old.Subject)
	}
	s.principal = p
	s.mu.Unlock()
	s.setExpiry(p.ExpiresAt)
	return protocol.AuthResult{Subject: p.Subject, ExpiresAt: p.ExpiresAt.Unix(), Limits: s.srv.advertised()}, nil
}

// setExpiry closes the connection with 4001 when the token expires, unless
// a refresh moves the expiry first.
func (s *session) setExpiry(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expAt = 0
	if !at.IsZero() {
		s.expAt = at.UnixNano()
	}
	s.rescheduleLocked(time.Now())
}
