package auth

import (
	"context"
	"errors"
	"sync"
)

// TokenVerifier checks an access token: Verifier does, and Revocations.Verifier wraps one.
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (*Principal, error)
}

// Revocations are what operators have taken from subjects, as of a position of the event log:
// sign-outs, which refuse a subject's tokens issued at or before a second, and blocks, which
// refuse all of them. Each subject's state carries the seq of the event it reflects, so that
// a state loaded from the database and the events tailed from the log may arrive in any
// order: what is older than what is known is ignored. Safe for concurrent use.
type Revocations struct {
	mu       sync.RWMutex
	subjects map[string]revocation
}

type revocation struct {
	signedOutAt int64 // Unix seconds; 0: never
	blocked     bool
	seq         int64
}

// NewRevocations returns revocations that refuse nothing.
func NewRevocations() *Revocations {
	return &Revocations{subjects: map[string]revocation{}}
}

// Set records subject's whole state as of the event seq (a row of the database), unless a
// later one is known.
func (r *Revocations) Set(subject string, signedOutAt int64, blocked bool, seq int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.subjects[subject]
	if seq <= cur.seq {
		return false
	}
	r.subjects[subject] = revocation{signedOutAt: max(signedOutAt, cur.signedOutAt), blocked: blocked, seq: seq}
	return true
}

// SignOut applies the sign-out event seq: tokens of subject issued at or before the second at
// are refused. False when the event is not newer than what is known.
func (r *Revocations) SignOut(subject string, at, seq int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.subjects[subject]
	if seq <= cur.seq {
		return false
	}
	cur.signedOutAt, cur.seq = max(cur.signedOutAt, at), seq
	r.subjects[subject] = cur
	return true
}

// SetBlocked applies the block or unblock event seq. False when it is not newer than what is
// known.
func (r *Revocations) SetBlocked(subject string, blocked bool, seq int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.subjects[subject]
	if seq <= cur.seq {
		return false
	}
	cur.blocked, cur.seq = blocked, seq
	r.subjects[subject] = cur
	return true
}

// Blocked reports whether subject is blocked.
func (r *Revocations) Blocked(subject string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.subjects[subject].blocked
}

// Check refuses p (an error of reason ReasonBlocked or ReasonSignedOut) when its subject is
// blocked, or was signed out at or after the second its token was issued. A token without
// "iat" cannot show it was issued after a sign-out and is refused after one.
func (r *Revocations) Check(p *Principal) error {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	cur, ok := r.subjects[p.Subject]
	r.mu.RUnlock()
	switch {
	case !ok:
		return nil
	case cur.blocked:
		return invalid(ReasonBlocked, errors.New("the subject is blocked"))
	case cur.signedOutAt > 0 && (p.IssuedAt.IsZero() || p.IssuedAt.Unix() <= cur.signedOutAt):
		return invalid(ReasonSignedOut, errors.New("the subject was signed out after the token was issued"))
	}
	return nil
}

// Verifier returns v refusing, after it, the tokens r refuses.
func (r *Revocations) Verifier(v TokenVerifier) TokenVerifier {
	return &revokingVerifier{v: v, r: r}
}

type revokingVerifier struct {
	v TokenVerifier
	r *Revocations
}

func (rv *revokingVerifier) Verify(ctx context.Context, token string) (*Principal, error) {
	p, err := rv.v.Verify(ctx, token)
	if err != nil {
		return nil, err
	}
	if err := rv.r.Check(p); err != nil {
		return nil, err
	}
	return p, nil
}
