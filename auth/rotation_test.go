package auth_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
)

// refreshIntervals are the key refresh settings the rotation tests run with: the default
// pacing, and none.
var refreshIntervals = []struct {
	name     string
	interval time.Duration
}{{"paced", 10 * time.Second}, {"unpaced", -1}}

// verification is one Verify of a concurrent run: its place in the run's order at its start
// and end, and whether the token passed.
type verification struct {
	start, end int64
	newKey     bool
	ok         bool
	reason     string
}

// verifyConcurrently verifies tokens drawn from old and fresh on workers goroutines at once,
// each n times, and returns every verification with its order.
func verifyConcurrently(v *auth.Verifier, old, fresh string, workers, n int) []verification {
	var order atomic.Int64
	var mu sync.Mutex
	var all []verification
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range n {
				useNew := rand.IntN(2) == 0
				tok := old
				if useNew {
					tok = fresh
				}
				rec := verification{start: order.Add(1), newKey: useNew}
				_, err := v.Verify(context.Background(), tok)
				rec.end, rec.ok, rec.reason = order.Add(1), err == nil, auth.Reason(err)
				mu.Lock()
				all = append(all, rec)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return all
}

// TestKeyRotationUnderConcurrentVerifications: with the issuer's key set rotated twice since
// the keys were cached, verifications of a token of the new key and of the retired one race,
// the key set answering slowly so that many wait for one fetch. Every token of the new key
// passes, none is refused for a fetch that had just ended; once one has passed, the retired
// key is refused to every verification that starts later; the issuer sees one key set request
// at a time, and with the refresh interval, one for the rotation.
func TestKeyRotationUnderConcurrentVerifications(t *testing.T) {
	for _, tc := range refreshIntervals {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			iss := startIssuer(t, &auth.IssuerOptions{Now: clock.Now})
			v := newVerifier(t, iss.URL(), &auth.VerifierOptions{Now: clock.Now, KeyRefreshInterval: tc.interval})
			retired := iss.mint(t, "alice", auth.TokenOptions{TTL: time.Hour})
			if _, err := v.Verify(context.Background(), retired); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the issuer keeps the current key and the previous one
				if err := iss.Rotate(); err != nil {
					t.Fatal(err)
				}
			}
			fresh := iss.mint(t, "alice", auth.TokenOptions{TTL: time.Hour})
			clock.Add(11 * time.Second)
			iss.keysDelay.Store(int64(5 * time.Millisecond))

			all := verifyConcurrently(v, retired, fresh, 16, 30)
			firstNew := int64(-1)
			for _, r := range all {
				if r.newKey && !r.ok {
					t.Errorf("a token of the new key refused (%s)", r.reason)
				}
				if r.newKey && r.ok && (firstNew < 0 || r.end < firstNew) {
					firstNew = r.end
				}
			}
			if firstNew < 0 {
				t.Fatal("no token of the new key passed")
			}
			for _, r := range all {
				if !r.newKey && r.start > firstNew && (r.ok || r.reason != auth.ReasonSignature) {
					t.Errorf("the retired key after the rotation was seen: ok %v, reason %q", r.ok, r.reason)
				}
			}
			if n := iss.keysMostAtOnce.Load(); n != 1 {
				t.Errorf("%d key set requests at once, want 1", n)
			}
			if n := iss.keyFetches.Load(); tc.interval > 0 && n != 2 {
				t.Errorf("%d key set requests, want 2 (first use, rotation)", n)
			}
		})
	}
}

// TestNewKidDoesNotJoinAnOlderFetch: a token of a key the issuer published while a key set
// request was already under way (its answer without the key) is not refused with that answer:
// its verification waits for it, then fetches again, past the refresh interval or without one.
func TestNewKidDoesNotJoinAnOlderFetch(t *testing.T) {
	for _, tc := range refreshIntervals {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			iss := startIssuer(t, &auth.IssuerOptions{Now: clock.Now})
			other := startIssuer(t, &auth.IssuerOptions{Now: clock.Now})
			v := newVerifier(t, iss.URL(), &auth.VerifierOptions{Now: clock.Now, KeyRefreshInterval: tc.interval})
			if _, err := v.Verify(context.Background(), iss.mint(t, "alice", auth.TokenOptions{})); err != nil {
				t.Fatal(err)
			}
			clock.Add(11 * time.Second)
			// A forged token's kid starts a fetch, which the issuer answers slowly with the
			// keys it has now.
			iss.keysDelay.Store(int64(300 * time.Millisecond))
			forgedDone := make(chan error, 1)
			go func() {
				_, err := v.Verify(context.Background(), other.mint(t, "mallory", auth.TokenOptions{}))
				forgedDone <- err
			}()
			for deadline := time.Now().Add(10 * time.Second); iss.keysAtOnce.Load() == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the forged token's key set request never arrived")
				}
			}
			// Meanwhile the issuer rotates and signs with its new key.
			if err := iss.Rotate(); err != nil {
				t.Fatal(err)
			}
			fresh := iss.mint(t, "alice", auth.TokenOptions{})
			clock.Add(11 * time.Second)
			iss.keysDelay.Store(0)
			if _, err := v.Verify(context.Background(), fresh); err != nil {
				t.Fatalf("a token of the key published during a fetch: %v", err)
			}
			if err := <-forgedDone; auth.Reason(err) != auth.ReasonSignature {
				t.Fatalf("forged token: Reason %q, error %v", auth.Reason(err), err)
			}
			if n := iss.keyFetches.Load(); n != 3 {
				t.Errorf("%d key set requests, want 3 (first use, the forged token's, the new kid's)", n)
			}
		})
	}
}
