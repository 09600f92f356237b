package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ballet/gateway/auth"
)

// issuer is the verifier of the issuer's tokens, with what its discovery needs.
type issuer struct {
	verifier interface {
		Verify(ctx context.Context, token string) (*auth.Principal, error)
	}
	background *auth.DiscoveringVerifier // discovered from New on; nil on the client port
	lazy       *lazyVerifier             // discovered once Run listens; nil otherwise
}

// newIssuer starts the discovery of Options.Issuer in the background, its failures and its
// success counted and logged; or, for an issuer on the client port, readies a verifier that
// waits for Run to discover it. The issuer may be down: the replica starts, refuses tokens and
// fails /readyz until its discovery document and keys are fetched.
func (s *Server) newIssuer() (*issuer, error) {
	o := s.o.Issuer
	if o.OnClientPort {
		l := &lazyVerifier{ready: make(chan struct{})}
		return &issuer{verifier: l, lazy: l}, nil
	}
	dv, err := auth.StartVerifier(o.URL, o.Audience, o.Options, &auth.DiscoveryOptions{
		OnFailure: func(err error) {
			s.Metrics.IssuerFailures.Inc()
			s.logger.Warn("OIDC issuer unreachable; tokens are refused until it answers", "issuer", o.URL, "err", err)
		},
		OnLoaded: func() {
			s.Metrics.IssuerLoaded.Set(1)
			s.logger.Info("OIDC issuer loaded", "issuer", o.URL)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("BALLET_OIDC_ISSUER: %w", err)
	}
	return &issuer{verifier: dv, background: dv}, nil
}

// discover discovers an issuer on the client port, once it listens: the tokens are then
// checked exactly as in production. It says whether the discovery succeeded.
func (s *Server) discover(ctx context.Context) bool {
	if s.issuer.lazy == nil {
		return true
	}
	vctx, cancel := context.WithTimeout(ctx, discoverTimeout)
	defer cancel()
	v, err := auth.NewVerifier(vctx, s.o.Issuer.URL, s.o.Issuer.Audience, s.o.Issuer.Options)
	s.issuer.lazy.set(v, err)
	if err != nil {
		s.Metrics.IssuerFailures.Inc()
		s.logger.Error("development issuer discovery failed", "err", err)
		return false
	}
	s.Metrics.IssuerLoaded.Set(1)
	return true
}

// IssuerReady returns nil once the issuer's discovery document and keys are loaded (an
// issuer on the client port: at once), and before that an error naming the issuer.
func (s *Server) IssuerReady() error { return s.issuer.ready() }

func (i *issuer) ready() error {
	if i.background != nil {
		return i.background.Ready()
	}
	return nil
}

func (i *issuer) close() {
	if i.background != nil {
		i.background.Close()
	}
}

// lazyVerifier answers once the issuer on the client port is discovered.
type lazyVerifier struct {
	once  sync.Once
	ready chan struct{}
	v     *auth.Verifier
	err   error
}

func (l *lazyVerifier) set(v *auth.Verifier, err error) {
	l.once.Do(func() {
		l.v, l.err = v, err
		close(l.ready)
	})
}

func (l *lazyVerifier) Verify(ctx context.Context, token string) (*auth.Principal, error) {
	select {
	case <-l.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: issuer not ready", auth.ErrInvalidToken)
	}
	if l.err != nil {
		return nil, errors.Join(auth.ErrInvalidToken, l.err)
	}
	return l.v.Verify(ctx, token)
}
