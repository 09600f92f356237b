package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Pauses between two attempts to reach the issuer: the first, doubled after each failure up
// to the last.
const (
	discoveryRetryMin = 100 * time.Millisecond
	discoveryRetryMax = 10 * time.Second
)

// DiscoveryOptions are what StartVerifier reports to. A nil *DiscoveryOptions reports nothing.
type DiscoveryOptions struct {
	// OnFailure is called after each attempt to fetch the discovery document or the first
	// key set that failed.
	OnFailure func(error)
	// OnLoaded is called once, when the discovery document and a key set have been fetched.
	OnLoaded func()
}

// DiscoveringVerifier is a Verifier that does not need its issuer to start: it fetches the
// issuer's discovery document and its key set in the background, again and again with backoff
// until both succeed. Until then it refuses every token as ReasonUnavailable. Safe for
// concurrent use; Close stops its goroutine.
type DiscoveringVerifier struct {
	issuer string
	v      atomic.Pointer[Verifier] // set once loaded
	mu     sync.Mutex
	err    error // the last attempt's failure, while not loaded
	cancel context.CancelFunc
	done   chan struct{}
}

// StartVerifier returns a DiscoveringVerifier for tokens of issuerURL whose aud contains
// audience, and begins its attempts. It fails only on empty arguments.
func StartVerifier(issuerURL, audience string, opts *VerifierOptions, d *DiscoveryOptions) (*DiscoveringVerifier, error) {
	if issuerURL == "" {
		return nil, errors.New("auth: empty OIDC issuer URL")
	}
	if audience == "" {
		return nil, fmt.Errorf("auth: OIDC issuer %s: empty audience", issuerURL)
	}
	var do DiscoveryOptions
	if d != nil {
		do = *d
	}
	ctx, cancel := context.WithCancel(context.Background())
	dv := &DiscoveringVerifier{issuer: issuerURL, cancel: cancel, done: make(chan struct{}),
		err: errors.New("not reached yet")}
	o := opts.withDefaults()
	go dv.loop(ctx, audience, o, do)
	return dv, nil
}

func (dv *DiscoveringVerifier) loop(ctx context.Context, audience string, o VerifierOptions, d DiscoveryOptions) {
	defer close(dv.done)
	pause := discoveryRetryMin
	var v *Verifier
	for {
		var err error
		if v == nil {
			v, err = discover(ctx, dv.issuer, audience, o)
		}
		if v != nil {
			if err = v.keys.load(ctx); err != nil {
				err = fmt.Errorf("auth: OIDC key set of issuer %s: %w", dv.issuer, err)
			}
		}
		if err == nil {
			dv.v.Store(v)
			dv.mu.Lock()
			dv.err = nil
			dv.mu.Unlock()
			if d.OnLoaded != nil {
				d.OnLoaded()
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		dv.mu.Lock()
		dv.err = err
		dv.mu.Unlock()
		if d.OnFailure != nil {
			d.OnFailure(err)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		pause = min(2*pause, discoveryRetryMax)
	}
}

// Issuer returns the issuer URL the verifier trusts.
func (dv *DiscoveringVerifier) Issuer() string { return dv.issuer }

// Ready returns nil once the discovery document and a key set have been fetched, and before
// that an error that names the issuer and the last attempt's failure.
func (dv *DiscoveringVerifier) Ready() error {
	if dv.v.Load() != nil {
		return nil
	}
	dv.mu.Lock()
	defer dv.mu.Unlock()
	return fmt.Errorf("the OIDC issuer %s (BALLET_OIDC_ISSUER) is not loaded: %v", dv.issuer, dv.err)
}

// Verify checks token as Verifier.Verify does once the issuer is loaded; before, it refuses
// it as ReasonUnavailable.
func (dv *DiscoveringVerifier) Verify(ctx context.Context, token string) (*Principal, error) {
	if v := dv.v.Load(); v != nil {
		return v.Verify(ctx, token)
	}
	return nil, invalid(ReasonUnavailable, errors.New("the OIDC issuer's keys are not loaded yet"))
}

// Close stops the attempts and waits for the goroutine to end.
func (dv *DiscoveringVerifier) Close() {
	dv.cancel()
	<-dv.done
}
