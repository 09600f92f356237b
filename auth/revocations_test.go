package auth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
)

type fixedVerifier struct{ p *auth.Principal }

func (v fixedVerifier) Verify(context.Context, string) (*auth.Principal, error) {
	p := *v.p
	return &p, nil
}

// TestRevocations: a sign-out refuses the tokens issued at or before its second and those
// without iat, a block every token until it is lifted; a change older than what is known,
// loaded or applied, is ignored.
func TestRevocations(t *testing.T) {
	const at = 1_800_000_000
	token := func(subject string, iat int64) *auth.Principal {
		p := &auth.Principal{Subject: subject}
		if iat != 0 {
			p.IssuedAt = time.Unix(iat, 0)
		}
		return p
	}
	reason := func(r *auth.Revocations, p *auth.Principal) string { return auth.Reason(r.Check(p)) }
	r := auth.NewRevocations()
	if got := reason(r, token("alice", at)); got != "" {
		t.Fatalf("nothing revoked: %q", got)
	}
	r.SignOut("alice", at, 10)
	for _, c := range []struct {
		iat  int64
		want string
	}{{at - 60, auth.ReasonSignedOut}, {at, auth.ReasonSignedOut}, {0, auth.ReasonSignedOut}, {at + 1, ""}} {
		if got := reason(r, token("alice", c.iat)); got != c.want {
			t.Errorf("iat %d after a sign-out at %d: %q, want %q", c.iat, at, got, c.want)
		}
	}
	if got := reason(r, token("bob", at)); got != "" {
		t.Errorf("another subject: %q", got)
	}
	if !r.SetBlocked("alice", true, 11) || reason(r, token("alice", at+60)) != auth.ReasonBlocked || !r.Blocked("alice") {
		t.Fatal("a block does not refuse a later token")
	}
	// The database's row of seq 10 (the sign-out alone) arrives after the block: ignored.
	if r.Set("alice", at, false, 10) || !r.Blocked("alice") {
		t.Fatal("an older state replaced a newer one")
	}
	if r.SetBlocked("alice", false, 11) || r.SignOut("alice", at+100, 9) {
		t.Fatal("an event not newer than the state was applied")
	}
	if !r.SetBlocked("alice", false, 12) || reason(r, token("alice", at+1)) != "" || reason(r, token("alice", at)) != auth.ReasonSignedOut {
		t.Fatal("an unblock does not restore what the sign-out leaves")
	}
	// A loaded state never moves a sign-out back.
	if !r.Set("alice", at-100, false, 13) || reason(r, token("alice", at)) != auth.ReasonSignedOut {
		t.Fatal("a loaded state moved the sign-out back")
	}

	v := r.Verifier(fixedVerifier{token("alice", at)})
	if _, err := v.Verify(context.Background(), "t"); !errors.Is(err, auth.ErrInvalidToken) || auth.Reason(err) != auth.ReasonSignedOut {
		t.Fatalf("the wrapped verifier: %v", err)
	}
	if p, err := r.Verifier(fixedVerifier{token("bob", at)}).Verify(context.Background(), "t"); err != nil || p.Subject != "bob" {
		t.Fatalf("the wrapped verifier refused bob: %v", err)
	}
}
