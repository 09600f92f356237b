package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// maxTokenBytes bounds the work spent on one token; real access tokens are a
// few kilobytes.
const maxTokenBytes = 16 << 10

// VerifierOptions configures a Verifier. A nil *VerifierOptions means defaults.
type VerifierOptions struct {
	// HTTPClient fetches the discovery document and the key set.
	// Default: a client with a 10s timeout over http.DefaultTransport.
	HTTPClient *http.Client
	// Now is the clock for expiry checks and key refresh pacing.
	// Default: time.Now.
	Now func() time.Time
	// KeyRefreshInterval is the least time between two key set fetches. A
	// token with an unknown key id (a key rotation, or a forgery) triggers a
	// fetch; within the interval it waits for the interval's end instead (256
	// at most at once), so a flood of forged tokens cannot turn into requests
	// to the issuer, and a new key is not refused for a fetch that had just
	// ended. Default 10s; negative means no limit.
	KeyRefreshInterval time.Duration
}

// Verifier checks OIDC access tokens (JWT). It is safe for concurrent use.
// Once the issuer's keys are cached, verifying a token makes no network call.
type Verifier struct {
	issuer   string
	audience string
	oidc     *oidc.IDTokenVerifier
	keys     *keySet
}

// NewVerifier discovers issuerURL now and returns a Verifier for tokens whose
// aud contains audience. ctx bounds the discovery request only.
func NewVerifier(ctx context.Context, issuerURL, audience string, opts *VerifierOptions) (*Verifier, error) {
	if issuerURL == "" {
		return nil, errors.New("auth: empty OIDC issuer URL")
	}
	if audience == "" {
		return nil, fmt.Errorf("auth: OIDC issuer %s: empty audience", issuerURL)
	}
	return discover(ctx, issuerURL, audience, opts.withDefaults())
}

// withDefaults returns the options with their defaults filled in (o may be nil).
func (opts *VerifierOptions) withDefaults() VerifierOptions {
	var o VerifierOptions
	if opts != nil {
		o = *opts
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.KeyRefreshInterval == 0 {
		o.KeyRefreshInterval = 10 * time.Second
	}
	return o
}

// discover fetches issuerURL's discovery document and returns a Verifier whose keys are not
// fetched yet.
func discover(ctx context.Context, issuerURL, audience string, o VerifierOptions) (*Verifier, error) {
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, o.HTTPClient), issuerURL)
	if err != nil {
		return nil, fmt.Errorf("auth: OIDC discovery for issuer %s: %w", issuerURL, err)
	}
	var meta struct {
		JWKSURL string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := provider.Claims(&meta); err != nil || meta.JWKSURL == "" {
		return nil, fmt.Errorf("auth: OIDC discovery for issuer %s: no jwks_uri (%v)", issuerURL, err)
	}
	// The algorithms go-oidc takes from discovery: those it supports, else RS256.
	cfg := &oidc.Config{ClientID: audience, Now: o.Now}
	for _, a := range meta.Algs {
		if signingAlgs[a] {
			cfg.SupportedSigningAlgs = append(cfg.SupportedSigningAlgs, a)
		}
	}
	keys := &keySet{url: meta.JWKSURL, client: o.HTTPClient, interval: o.KeyRefreshInterval, now: o.Now}
	keys.algs = []jose.SignatureAlgorithm{jose.RS256}
	if len(cfg.SupportedSigningAlgs) > 0 {
		keys.algs = keys.algs[:0]
		for _, a := range cfg.SupportedSigningAlgs {
			keys.algs = append(keys.algs, jose.SignatureAlgorithm(a))
		}
	}
	// go-oidc checks the algorithm, iss, aud and expiry; keys checks the signature.
	return &Verifier{issuer: issuerURL, audience: audience, oidc: oidc.NewVerifier(issuerURL, keys, cfg), keys: keys}, nil
}

// Issuer returns the issuer URL the Verifier trusts.
func (v *Verifier) Issuer() string { return v.issuer }

// Audience returns the audience tokens must carry.
func (v *Verifier) Audience() string { return v.audience }

// Verify checks token and returns its Principal. Every error wraps
// ErrInvalidToken; Reason classifies it. ctx bounds a key set fetch, if one
// is needed.
func (v *Verifier) Verify(ctx context.Context, token string) (*Principal, error) {
	if token == "" {
		return nil, invalid(ReasonMalformed, errors.New("empty token"))
	}
	if len(token) > maxTokenBytes {
		return nil, invalid(ReasonMalformed, fmt.Errorf("token longer than %d bytes", maxTokenBytes))
	}
	idt, err := v.oidc.Verify(ctx, token)
	if err != nil {
		return nil, invalid(classify(err), err)
	}
	if idt.Subject == "" {
		return nil, invalid(ReasonMissingSubject, errors.New("no sub claim"))
	}
	var c struct {
		ClientID any `json:"client_id"`
		AZP      any `json:"azp"`
	}
	if err := idt.Claims(&c); err != nil {
		return nil, invalid(ReasonMalformed, fmt.Errorf("claims: %w", err))
	}
	clientID, ok1 := c.ClientID.(string)
	azp, ok2 := c.AZP.(string)
	if (c.ClientID != nil && !ok1) || (c.AZP != nil && !ok2) {
		return nil, invalid(ReasonMalformed, errors.New("client_id or azp is not a string"))
	}
	if clientID == "" {
		clientID = azp
	}
	return &Principal{
		Subject:   idt.Subject,
		ClientID:  clientID,
		Human:     idt.Subject != clientID,
		ExpiresAt: idt.Expiry,
		IssuedAt:  idt.IssuedAt,
	}, nil
}
