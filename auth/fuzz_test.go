package auth_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
)

// FuzzVerify feeds arbitrary strings to Verify: it must never panic, and it
// either returns a Principal or an error that wraps ErrInvalidToken with a
// known reason.
func FuzzVerify(f *testing.F) {
	iss := startIssuer(f, nil)
	// A token naming a key the set lacks (or none) waits for the refresh interval's end, and
	// is refused after the fetch then: a short interval, not the default 10 s for each such input.
	v := newVerifier(f, iss.URL(), &auth.VerifierOptions{KeyRefreshInterval: 50 * time.Millisecond})
	valid := iss.mint(f, "alice", auth.TokenOptions{ClientID: "web-ui"})
	f.Add(valid)
	f.Add(valid[:len(valid)-2])
	f.Add(valid + ".x")
	reasons := auth.Reasons()
	f.Fuzz(func(t *testing.T, token string) {
		p, err := v.Verify(context.Background(), token)
		switch {
		case err == nil && (p == nil || p.Subject == ""):
			t.Fatalf("no error but principal %+v", p)
		case err != nil && p != nil:
			t.Fatalf("principal %+v with error %v", *p, err)
		case err != nil && !errors.Is(err, auth.ErrInvalidToken):
			t.Fatalf("error %v does not wrap ErrInvalidToken", err)
		case err != nil && !slices.Contains(reasons, auth.Reason(err)):
			t.Fatalf("unknown reason %q", auth.Reason(err))
		}
	})
}
