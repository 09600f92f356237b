package auth

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/ballet/gateway/internal/getonly"
)

// Paths served by an Issuer, relative to its URL.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	JWKSPath      = "/jwks"
)

// keysKept is how many signing keys the JWKS publishes: the current one and
// the one before it, so tokens minted before a rotation stay valid.
const keysKept = 2

// IssuerOptions configures an Issuer. A nil *IssuerOptions means defaults.
type IssuerOptions struct {
	// KeyBits is the RSA key size. Default 2048, the minimum.
	KeyBits int
	// Now is the clock for iat and exp. Default: time.Now.
	Now func() time.Time
}

// Issuer is a small, real OIDC issuer for development and tests: it serves
// discovery and its JWK set over HTTP and mints RS256 JWT access tokens
// (RFC 9068 shape). It keeps its keys in memory and is safe for concurrent use.
//
// It is an http.Handler: mount it so requests for the issuer URL's path and
// below reach it, e.g. mux.Handle("/dev/oidc/", iss) for issuer
// "http://127.0.0.1:8080/dev/oidc". It matches the part of the request path
// after the issuer URL's path, so http.StripPrefix in front of it works too.
type Issuer struct {
	url    string
	prefix string // path of url, without a trailing slash
	bits   int
	now    func() time.Time

	mu   sync.RWMutex
	keys []*issuerKey // oldest first; the last signs
}

type issuerKey struct {
	kid    string
	key    *rsa.PrivateKey
	signer jose.Signer
}

// TokenOptions describes a token to Mint.
type TokenOptions struct {
	// Audience is the "aud" claim; empty means no aud claim.
	Audience []string
	// ClientID sets "client_id" and "azp"; empty sets neither.
	ClientID string
	// TTL is the token lifetime from IssuedAt. Zero or negative means 1h.
	TTL time.Duration
	// IssuedAt is "iat" and "nbf". Zero means now.
	IssuedAt time.Time
	// Extra claims are set last and replace standard ones of the same name;
	// a nil value removes the claim (tests use this to forge bad tokens).
	Extra map[string]any
}

// NewIssuer returns an issuer whose "iss" and discovery "issuer" are exactly
// issuerURL (an http or https URL without query or fragment).
func NewIssuer(issuerURL string, opts *IssuerOptions) (*Issuer, error) {
	u, err := url.Parse(issuerURL)
	if err != nil {
		return nil, fmt.Errorf("auth: issuer URL %q: %w", issuerURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("auth: issuer URL %q: want http(s)://host[/path] without query or fragment", issuerURL)
	}
	var o IssuerOptions
	if opts != nil {
		o = *opts
	}
	if o.KeyBits == 0 {
		o.KeyBits = 2048
	}
	if o.KeyBits < 2048 {
		return nil, fmt.Errorf("auth: issuer key size %d bits: minimum is 2048", o.KeyBits)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	i := &Issuer{
		url:    issuerURL,
		prefix: strings.TrimSuffix(u.Path, "/"),
		bits:   o.KeyBits,
		now:    o.Now,
	}
	if err := i.Rotate(); err != nil {
		return nil, err
	}
	return i, nil
}

// URL returns the issuer URL.
func (i *Issuer) URL() string { return i.url }

// KeyID returns the key id ("kid") new tokens are signed with.
func (i *Issuer) KeyID() string {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.keys[len(i.keys)-1].kid
}

// Rotate makes a new signing key current. The JWK set then publishes the new
// key and the previous one; older keys are dropped.
func (i *Issuer) Rotate() error {
	key, err := rsa.GenerateKey(rand.Reader, i.bits)
	if err != nil {
		return fmt.Errorf("auth: issuer key: %w", err)
	}
	thumb, err := (&jose.JSONWebKey{Key: &key.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		return fmt.Errorf("auth: issuer key id: %w", err)
	}
	kid := base64.RawURLEncoding.EncodeToString(thumb)
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"),
	)
	if err != nil {
		return fmt.Errorf("auth: issuer signer: %w", err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.keys = append(i.keys, &issuerKey{kid: kid, key: key, signer: signer})
	if n := len(i.keys); n > keysKept {
		i.keys = append([]*issuerKey(nil), i.keys[n-keysKept:]...)
	}
	return nil
}

// Mint returns a signed access token for subject.
func (i *Issuer) Mint(subject string, o TokenOptions) (string, error) {
	if subject == "" {
		return "", errors.New("auth: mint: empty subject")
	}
	iat := o.IssuedAt
	if iat.IsZero() {
		iat = i.now()
	}
	ttl := o.TTL
	if ttl <= 0 {
		ttl = time.Hour
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", fmt.Errorf("auth: mint: %w", err)
	}
	claims := map[string]any{
		"iss": i.url,
		"sub": subject,
		"iat": iat.Unix(),
		"nbf": iat.Unix(),
		"exp": iat.Add(ttl).Unix(),
		"jti": hex.EncodeToString(jti[:]),
	}
	switch len(o.Audience) {
	case 0:
	case 1:
		claims["aud"] = o.Audience[0]
	default:
		claims["aud"] = o.Audience
	}
	if o.ClientID != "" {
		claims["client_id"] = o.ClientID
		claims["azp"] = o.ClientID
	}
	for k, v := range o.Extra {
		if v == nil {
			delete(claims, k)
		} else {
			claims[k] = v
		}
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("auth: mint: claims: %w", err)
	}
	i.mu.RLock()
	signer := i.keys[len(i.keys)-1].signer
	i.mu.RUnlock()
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("auth: mint: sign: %w", err)
	}
	return jws.CompactSerialize()
}

// ServeHTTP answers GET and HEAD for the discovery document and the JWK set
// ("/jwks", also "/keys") under the issuer URL's path.
func (i *Issuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := r.URL.Path
	if i.prefix != "" && strings.HasPrefix(rest, i.prefix+"/") {
		rest = rest[len(i.prefix):]
	}
	var body any
	switch rest {
	case DiscoveryPath:
		body = i.discovery()
	case JWKSPath, "/keys":
		body = i.jwks()
	default:
		http.NotFound(w, r)
		return
	}
	if !getonly.Allow(w, r) {
		return
	}
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	if r.Method == http.MethodGet {
		w.Write(b)
	}
}

func (i *Issuer) discovery() map[string]any {
	base := strings.TrimSuffix(i.url, "/")
	return map[string]any{
		"issuer":                                i.url,
		"jwks_uri":                              base + JWKSPath,
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{string(jose.RS256)},
		"claims_supported":                      []string{"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "client_id", "azp"},
	}
}

func (i *Issuer) jwks() jose.JSONWebKeySet {
	i.mu.RLock()
	defer i.mu.RUnlock()
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(i.keys))}
	for k := len(i.keys) - 1; k >= 0; k-- { // current key first
		set.Keys = append(set.Keys, jose.JSONWebKey{
			Key:       &i.keys[k].key.PublicKey,
			KeyID:     i.keys[k].kid,
			Algorithm: string(jose.RS256),
			Use:       "sig",
		})
	}
	return set
}
