package auth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/ballet/gateway/auth"
)

func newVerifier(t testing.TB, issuerURL string, opts *auth.VerifierOptions) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(context.Background(), issuerURL, audience, opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifyValid(t *testing.T) {
	clock := newFakeClock()
	iss := startIssuer(t, &auth.IssuerOptions{Now: clock.Now})
	v := newVerifier(t, iss.URL(), &auth.VerifierOptions{Now: clock.Now})

	tok := iss.mint(t, "alice", auth.TokenOptions{Audience: []string{"other", audience}, TTL: 30 * time.Minute})
	p, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Principal{Subject: "alice", Human: true, ExpiresAt: clock.Now().Add(30 * time.Minute)}
	if p.Subject != want.Subject || p.ClientID != want.ClientID || p.Human != want.Human || !p.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("principal = %+v, want %+v", *p, want)
	}
}

func TestVerifyHumanAndService(t *testing.T) {
	iss := startIssuer(t, nil)
	v := newVerifier(t, iss.URL(), nil)
	tests := []struct {
		name, subject string
		opts          auth.TokenOptions
		clientID      string
		human         bool
	}{
		{"user without client", "alice", auth.TokenOptions{}, "", true},
		{"user through web client", "alice", auth.TokenOptions{ClientID: "web-ui"}, "web-ui", true},
		{"client credentials", "svc-ci", auth.TokenOptions{ClientID: "svc-ci"}, "svc-ci", false},
		{"azp only, service", "svc-ci", auth.TokenOptions{Extra: map[string]any{"azp": "svc-ci"}}, "svc-ci", false},
		{"azp only, human", "bob", auth.TokenOptions{Extra: map[string]any{"azp": "web-ui"}}, "web-ui", true},
		{"client_id wins over azp", "svc-a", auth.TokenOptions{Extra: map[string]any{"client_id": "svc-a", "azp": "web-ui"}}, "svc-a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := v.Verify(context.Background(), iss.mint(t, tt.subject, tt.opts))
			if err != nil {
				t.Fatal(err)
			}
			if p.Subject != tt.subject || p.ClientID != tt.clientID || p.Human != tt.human {
				t.Fatalf("principal = %+v, want subject %q client %q human %v", *p, tt.subject, tt.clientID, tt.human)
			}
		})
	}
}

// signWith signs claims with key under kid, as an attacker holding a key of
// its own would.
func signWith(t *testing.T, key *rsa.PrivateKey, kid string, alg jose.SignatureAlgorithm, claims map[string]any) string {
	t.Helper()
	var signingKey any = jose.JSONWebKey{Key: key, KeyID: kid}
	if alg == jose.HS256 {
		signingKey = jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: kid}
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: signingKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tamper replaces the payload of a signed token, keeping header and signature.
func tamper(t *testing.T, tok string, edit func(map[string]any)) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	edit(claims)
	raw, err = json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

func TestVerifyRejects(t *testing.T) {
	clock := newFakeClock()
	iss := startIssuer(t, &auth.IssuerOptions{Now: clock.Now})
	// No refresh limit: every rejected signature below really refetches the key set.
	v := newVerifier(t, iss.URL(), &auth.VerifierOptions{Now: clock.Now, KeyRefreshInterval: -1})
	other := startIssuer(t, &auth.IssuerOptions{Now: clock.Now})
	attackerKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	forged := map[string]any{
		"iss": iss.URL(), "sub": "mallory", "aud": audience,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}

	tests := []struct {
		name   string
		token  string
		reason string
	}{
		{"wrong audience", iss.mint(t, "alice", auth.TokenOptions{Audience: []string{"someone-else"}}), auth.ReasonAudience},
		{"no audience", iss.mint(t, "alice", auth.TokenOptions{Audience: []string{}}), auth.ReasonAudience},
		{"wrong issuer", iss.mint(t, "alice", auth.TokenOptions{Extra: map[string]any{"iss": "https://evil.example"}}), auth.ReasonIssuer},
		{"expired", iss.mint(t, "alice", auth.TokenOptions{IssuedAt: now.Add(-2 * time.Hour), TTL: time.Hour}), auth.ReasonExpired},
		{"no exp", iss.mint(t, "alice", auth.TokenOptions{Extra: map[string]any{"exp": nil}}), auth.ReasonExpired},
		{"empty subject", iss.mint(t, "alice", auth.TokenOptions{Extra: map[string]any{"sub": ""}}), auth.ReasonMissingSubject},
		{"tampered payload", tamper(t, iss.mint(t, "alice", auth.TokenOptions{}), func(c map[string]any) { c["sub"] = "admin" }), auth.ReasonSignature},
		{"foreign key, same kid", signWith(t, attackerKey, iss.KeyID(), jose.RS256, forged), auth.ReasonSignature},
		{"foreign key, no kid", signWith(t, attackerKey, "", jose.RS256, forged), auth.ReasonSignature},
		{"another issuer's token", other.mint(t, "alice", auth.TokenOptions{}), auth.ReasonSignature},
		{"empty signature", "eyJhbGciOiJSUzI1NiJ9.e30.", auth.ReasonSignature},
		{"symmetric algorithm", signWith(t, nil, iss.KeyID(), jose.HS256, forged), auth.ReasonMalformed},
		{"non-string client_id", iss.mint(t, "alice", auth.TokenOptions{Extra: map[string]any{"client_id": 7}}), auth.ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := v.Verify(context.Background(), tt.token)
			if err == nil {
				t.Fatalf("verified: %+v", *p)
			}
			if p != nil {
				t.Errorf("principal %+v returned with error", *p)
			}
			if !errors.Is(err, auth.ErrInvalidToken) {
				t.Errorf("error %v does not wrap ErrInvalidToken", err)
			}
			if got := auth.Reason(err); got != tt.reason {
				t.Errorf("Reason = %q, want %q (error: %v)", got, tt.reason, err)
			}
		})
	}
}

func TestVerifyMalformed(t *testing.T) {
	iss := startIssuer(t, nil)
	v := newVerifier(t, iss.URL(), nil)
	for _, tok := range []string{
		"", "abc", "...", "a.b.c", "a.b.c.d", "!!!.@@@.###",
		"eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", // alg none
		strings.Repeat("a", 20<<10),
	} {
		_, err := v.Verify(context.Background(), tok)
		if !errors.Is(err, auth.ErrInvalidToken) || auth.Reason(err) != auth.ReasonMalformed {
			t.Errorf("Verify(%.40q): Reason %q, error %v; want malformed", tok, auth.Reason(err), err)
		}
	}
	if n := iss.keyFetches.Load(); n != 0 {
		t.Errorf("malformed tokens caused %d key set fetches", n)
	}
}

func TestKeyRotation(t *testing.T) {
	clock := newFakeClock()
	iss := startIssuer(t, &auth.IssuerOptions{Now: clock.Now})
	v := newVerifier(t, iss.URL(), &auth.VerifierOptions{Now: clock.Now})
	ctx := context.Background()

	first := iss.mint(t, "alice", auth.TokenOptions{TTL: 24 * time.Hour})
	if _, err := v.Verify(ctx, first); err != nil {
		t.Fatal(err)
	}
	firstKid := iss.KeyID()
	if err := iss.Rotate(); err != nil {
		t.Fatal(err)
	}
	if iss.KeyID() == firstKid {
		t.Fatal("Rotate kept the key id")
	}
	second := iss.mint(t, "alice", auth.TokenOptions{TTL: 24 * time.Hour})

	// Within the refresh interval the new kid is not refused by the keys cached a moment ago:
	// its verification waits for the interval's end, then fetches.
	done := make(chan error, 1)
	go func() {
		_, err := v.Verify(ctx, second)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("new kid inside the refresh interval answered before the interval ended: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if n := iss.keyFetches.Load(); n != 1 {
		t.Fatalf("key set fetched %d times inside the interval, want 1", n)
	}
	clock.Add(11 * time.Second)
	if err := <-done; err != nil {
		t.Fatalf("token with the new kid: %v", err)
	}
	if _, err := v.Verify(ctx, first); err != nil {
		t.Fatalf("token with the previous kid: %v", err)
	}
	if n := iss.keyFetches.Load(); n != 2 {
		t.Errorf("key set fetched %d times, want 2 (first use, rotation)", n)
	}

	// A second rotation retires the first key.
	if err := iss.Rotate(); err != nil {
		t.Fatal(err)
	}
	third := iss.mint(t, "alice", auth.TokenOptions{})
	clock.Add(11 * time.Second)
	if _, err := v.Verify(ctx, third); err != nil {
		t.Fatalf("third token after the second rotation: %v", err)
	}
	if _, err := v.Verify(ctx, second); err != nil {
		t.Errorf("second token after the second rotation: %v", err)
	}
	// The keys of the fetch above are the ones cached: the retired key is refused at once,
	// and from then on.
	for range 5 {
		if _, err := v.Verify(ctx, first); auth.Reason(err) != auth.ReasonSignature {
			t.Fatalf("token of a retired key, again: Reason %q, error %v; want signature", auth.Reason(err), err)
		}
	}
}

func TestKeyRotationWithoutRefreshLimit(t *testing.T) {
	iss := startIssuer(t, nil)
	v := newVerifier(t, iss.URL(), &auth.VerifierOptions{KeyRefreshInterval: -1})
	ctx := context.Background()
	old := iss.mint(t, "alice", auth.TokenOptions{})
	if _, err := v.Verify(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := iss.Rotate(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, iss.mint(t, "alice", auth.TokenOptions{})); err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
	if _, err := v.Verify(ctx, old); err != nil {
		t.Errorf("old key after rotation: %v", err)
	}
}

// TestNoNetworkPerToken checks that cached keys serve concurrent verifications, and that
// forged tokens do not turn into key set requests: one naming a cached key id is refused at
// once; those naming an unknown one wait for the interval's end (at most maxKeyWaiters of
// them, the others refused as unknown_key) and share its one fetch.
func TestNoNetworkPerToken(t *testing.T) {
	clock := newFakeClock()
	iss := startIssuer(t, &auth.IssuerOptions{Now: clock.Now})
	v := newVerifier(t, iss.URL(), &auth.VerifierOptions{Now: clock.Now})
	other := startIssuer(t, &auth.IssuerOptions{Now: clock.Now})
	ctx := context.Background()
	attackerKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	sameKid := signWith(t, attackerKey, iss.KeyID(), jose.RS256, map[string]any{
		"iss": iss.URL(), "sub": "mallory", "aud": audience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})

	tokens := []string{
		iss.mint(t, "alice", auth.TokenOptions{}),
		iss.mint(t, "svc", auth.TokenOptions{ClientID: "svc"}),
		iss.mint(t, "bob", auth.TokenOptions{ClientID: "web-ui"}),
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := range 8 {
		wg.Go(func() {
			for k := range 50 {
				if _, err := v.Verify(ctx, tokens[(g+k)%len(tokens)]); err != nil {
					errs <- err
				}
				if _, err := v.Verify(ctx, sameKid); auth.Reason(err) != auth.ReasonSignature {
					errs <- fmt.Errorf("forged token of a cached kid: %w", err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if d, k := iss.discoveries.Load(), iss.keyFetches.Load(); d != 1 || k != 1 {
		t.Errorf("discovery requests %d, key set requests %d; want 1 and 1", d, k)
	}

	// Tokens of an unknown kid inside the interval: maxKeyWaiters of them wait, the rest are
	// refused at once as unknown_key.
	const waiters, extra = 256, 40
	unknownKid := other.mint(t, "mallory", auth.TokenOptions{})
	results := make(chan string, waiters+extra)
	for range waiters + extra {
		go func() {
			_, err := v.Verify(ctx, unknownKid)
			results <- auth.Reason(err)
		}()
	}
	for range extra {
		select {
		case r := <-results:
			if r != auth.ReasonUnknownKey {
				t.Fatalf("a verification beyond the waiters' bound: Reason %q, want unknown_key", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the verifications beyond the waiters' bound were not refused at once")
		}
	}
	if k := iss.keyFetches.Load(); k != 1 {
		t.Errorf("key set requests %d while tokens of an unknown kid wait, want 1", k)
	}
	// The interval ends: one fetch answers every waiting one.
	clock.Add(11 * time.Second)
	for range waiters {
		if r := <-results; r != auth.ReasonSignature {
			t.Errorf("a forged token of an unknown kid: Reason %q, want signature", r)
		}
	}
	if k := iss.keyFetches.Load(); k != 2 {
		t.Errorf("key set requests %d after the interval, want 2", k)
	}
	// The next ones wait for the next interval, without a fetch until then.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	for range 20 {
		if _, err := v.Verify(short, unknownKid); auth.Reason(err) != auth.ReasonUnknownKey {
			t.Fatalf("forged token waiting past its context: Reason %q, error %v", auth.Reason(err), err)
		}
	}
	if k := iss.keyFetches.Load(); k != 2 {
		t.Errorf("key set requests %d within the next interval, want 2", k)
	}
}

func TestNewVerifierUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/oidc"
	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := auth.NewVerifier(ctx, url, audience, nil)
	if err == nil {
		t.Fatal("NewVerifier succeeded against a closed server")
	}
	if !strings.Contains(err.Error(), url) {
		t.Errorf("error %q does not name the issuer URL %s", err, url)
	}
	if errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("start-up error wraps ErrInvalidToken: %v", err)
	}
}

func TestNewVerifierBadDiscovery(t *testing.T) {
	iss := startIssuer(t, nil)
	tests := map[string]string{
		"issuer mismatch": iss.srv.URL + "/dev/oidc/", // discovery answers without the slash
		"no discovery":    iss.srv.URL + "/elsewhere", // 404
	}
	for name, url := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := auth.NewVerifier(context.Background(), url, audience, nil)
			if err == nil || !strings.Contains(err.Error(), url) {
				t.Fatalf("error %v; want one naming %s", err, url)
			}
		})
	}
	if _, err := auth.NewVerifier(context.Background(), iss.URL(), "", nil); err == nil {
		t.Error("empty audience accepted")
	}
}

func TestVerifyUnavailable(t *testing.T) {
	iss := startIssuer(t, nil)
	v := newVerifier(t, iss.URL(), nil)
	tok := iss.mint(t, "alice", auth.TokenOptions{})
	iss.srv.Close() // keys were never fetched
	_, err := v.Verify(context.Background(), tok)
	if !errors.Is(err, auth.ErrInvalidToken) || auth.Reason(err) != auth.ReasonUnavailable {
		t.Fatalf("Reason %q, error %v; want unavailable", auth.Reason(err), err)
	}
	// Within the refresh interval the failure is answered without a new attempt.
	_, err = v.Verify(context.Background(), tok)
	if auth.Reason(err) != auth.ReasonUnavailable {
		t.Fatalf("second attempt: Reason %q, error %v; want unavailable", auth.Reason(err), err)
	}
}

func TestVerifyIssuerWithoutPath(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	iss, err := auth.NewIssuer(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/", iss)
	v := newVerifier(t, iss.URL(), nil)
	tok, err := iss.Mint("alice", auth.TokenOptions{Audience: []string{audience}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
}

func TestReason(t *testing.T) {
	if got := auth.Reason(nil); got != "" {
		t.Errorf("Reason(nil) = %q", got)
	}
	if got := auth.Reason(errors.New("boom")); got != auth.ReasonOther {
		t.Errorf("Reason(foreign error) = %q", got)
	}
	if got := auth.Reason(auth.ErrInvalidToken); got != auth.ReasonOther {
		t.Errorf("Reason(ErrInvalidToken) = %q", got)
	}
	if n := len(auth.Reasons()); n != 11 {
		t.Errorf("Reasons() has %d values", n)
	}
}
