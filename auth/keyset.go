package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// maxKeySetBytes bounds a key set response kept in memory.
const maxKeySetBytes = 1 << 20

// keySet is the issuer's JWKS as go-oidc's IDTokenVerifier uses it (oidc.KeySet): it checks a
// token's signature against the cached keys, and fetches the set again when they do not
// verify it (a rotation, or a forgery).
//
// Its invariants, all kept under mu:
//   - the cached keys are those of the last fetch that succeeded, stored in the same step that
//     ends the fetch: once a fetch has shown a rotation, no verification that starts later sees
//     the keys from before it (a retired key is not accepted once more);
//   - a verification the cached keys fail waits for a fetch that started after it read them,
//     never for the result of one that had already started (a new kid is not refused for a
//     fetch that began before the issuer published it);
//   - at most one fetch runs at a time, and one starts at most once per interval, so forged
//     tokens cannot turn into requests to the issuer. Within the interval, a token whose key id
//     the cached keys lack (or that names none) waits for the next fetch, at the interval's end,
//     rather than being refused by the cached keys (a new kid is not refused for a fetch that
//     had just ended); at most maxKeyWaiters wait at once, and those beyond, or whose context
//     ends first, are refused as unknown_key. A token whose key id is cached but whose signature fails is refused at once:
//     an issuer does not reuse a key id for a new key. So is one whose key id a fetch has seen
//     retired (in the set before it, not after): an issuer does not publish a retired key again.
type keySet struct {
	url      string
	client   *http.Client
	algs     []jose.SignatureAlgorithm
	interval time.Duration // <= 0: no pacing
	now      func() time.Time

	mu      sync.Mutex
	keys    []jose.JSONWebKey // of the last fetch that succeeded
	started uint64            // fetches started so far; a fetch's seq is the count when it started
	running *keyFetch         // nil when no fetch runs
	last    time.Time         // when the last fetch started
	lastErr error             // the last fetch's failure; nil once one succeeds
	waiting int               // verifications waiting for the interval to end
	retired map[string]bool   // key ids fetches saw leave the set, at most maxRetiredKids
}

// maxRetiredKids bounds the retired key ids kept; beyond it they are forgotten (and a token of
// one waits for a fetch as an unknown one would).
const maxRetiredKids = 64

// maxKeyWaiters bounds the verifications that wait for the refresh interval to end. Each holds
// a goroutine and its token (at most the read limit) for at most the interval.
const maxKeyWaiters = 256

// waitPoll is the longest a waiting verification sleeps before it reads the clock again (the
// clock may be a test's).
const waitPoll = 100 * time.Millisecond

// errUnknownKey refuses a token of a key the cached set lacks before the next fetch could show
// it: beyond maxKeyWaiters, or when its context ends first. go-oidc passes on only its text,
// which classify recognises.
var errUnknownKey = errors.New("unknown signing key, not fetched yet")

var _ oidc.KeySet = (*keySet)(nil)

// keyFetch is one request for the key set; done is closed once keys or err is set.
type keyFetch struct {
	seq  uint64
	done chan struct{}
	keys []jose.JSONWebKey
	err  error
}

// VerifySignature returns the payload of jwt if one of the issuer's keys signed it. go-oidc
// has already checked the algorithm and the number of signatures. A fetch failure's error
// says "fetching keys" (go-oidc passes only its text on).
func (s *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, s.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	kid := ""
	if len(jws.Signatures) > 0 {
		kid = jws.Signatures[0].Header.KeyID
	}
	s.mu.Lock()
	keys, seen := s.keys, s.started
	s.mu.Unlock()
	if payload, ok := verifyWith(jws, kid, keys); ok {
		return payload, nil
	}
	keys, err = s.fresh(ctx, seen, kid)
	if errors.Is(err, errUnknownKey) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("fetching keys: %w", err)
	}
	if payload, ok := verifyWith(jws, kid, keys); ok {
		return payload, nil
	}
	return nil, errors.New("failed to verify id token signature")
}

// knownKid reports whether one of keys has the key id kid ("" is never known).
func knownKid(kid string, keys []jose.JSONWebKey) bool {
	for i := range keys {
		if kid != "" && keys[i].KeyID == kid {
			return true
		}
	}
	return false
}

// verifyWith verifies jws with the keys of kid (every key when the token names none).
func verifyWith(jws *jose.JSONWebSignature, kid string, keys []jose.JSONWebKey) ([]byte, bool) {
	for i := range keys {
		if kid == "" || keys[i].KeyID == kid {
			if payload, err := jws.Verify(&keys[i]); err == nil {
				return payload, true
			}
		}
	}
	return nil, false
}

// fresh returns the keys of a fetch that started after seen fetches had (the count when the
// caller read the cached keys): it joins such a fetch, waits out an older one and starts the
// next. Within the interval since the last start it answers with the cached keys, or, when
// they lack kid and no fetch saw it retired, waits for the interval's end and fetches.
func (s *keySet) fresh(ctx context.Context, seen uint64, kid string) ([]jose.JSONWebKey, error) {
	for {
		s.mu.Lock()
		f := s.running
		if f == nil {
			if s.started > seen && s.lastErr == nil {
				// A fetch that started after the caller's read has ended: its keys are cached.
				keys := s.keys
				s.mu.Unlock()
				return keys, nil
			}
			if left := s.intervalLeft(); left > 0 {
				// After a failed fetch the failure answers until the interval's end: the
				// issuer is down, and waiting would only hold the caller.
				if s.lastErr == nil && !knownKid(kid, s.keys) && !s.retired[kid] {
					if err := s.waitInterval(ctx, left); err != nil {
						return nil, err
					}
					continue
				}
				keys, err := s.keys, s.lastErr
				s.mu.Unlock()
				if err != nil {
					return nil, fmt.Errorf("the last key set fetch, less than %v ago, failed: %w", s.interval, err)
				}
				return keys, nil
			}
			f = s.start()
		}
		s.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.seq > seen {
			return f.keys, f.err
		}
		// f had started before the caller read the cache: the next fetch is the caller's.
	}
}

// intervalLeft is how long until the next fetch may start (s.mu held); 0 or less: now.
func (s *keySet) intervalLeft() time.Duration {
	if s.interval <= 0 || s.last.IsZero() {
		return 0
	}
	return s.interval - s.now().Sub(s.last)
}

// waitInterval sleeps (s.mu held on entry, released on return) until left has passed, at most
// waitPoll at a time, or ctx ends. It refuses the caller beyond maxKeyWaiters.
func (s *keySet) waitInterval(ctx context.Context, left time.Duration) error {
	if s.waiting >= maxKeyWaiters {
		s.mu.Unlock()
		return fmt.Errorf("%w: more than %d tokens wait for the next key set fetch", errUnknownKey, maxKeyWaiters)
	}
	s.waiting++
	s.mu.Unlock()
	t := time.NewTimer(min(left, waitPoll))
	defer t.Stop()
	var err error
	select {
	case <-t.C:
	case <-ctx.Done():
		err = fmt.Errorf("%w: waiting for the next key set fetch: %w", errUnknownKey, ctx.Err())
	}
	s.mu.Lock()
	s.waiting--
	s.mu.Unlock()
	return err
}

// start begins a fetch (s.mu held). Its goroutine ends with the request (fetchTimeout at
// most), whether or not anyone still waits for it.
func (s *keySet) start() *keyFetch {
	s.started++
	f := &keyFetch{seq: s.started, done: make(chan struct{})}
	s.running, s.last = f, s.now()
	go func() {
		keys, err := s.fetch()
		s.mu.Lock()
		defer s.mu.Unlock()
		f.keys, f.err = keys, err
		if err == nil {
			s.retire(s.keys, keys)
			s.keys = keys
		} else {
			f.keys = s.keys
		}
		s.lastErr, s.running = err, nil
		close(f.done)
	}()
	return f
}

// retire records the key ids of old that are not in keys as retired, and forgets those that
// are in keys again (s.mu held).
func (s *keySet) retire(old, keys []jose.JSONWebKey) {
	for i := range keys {
		delete(s.retired, keys[i].KeyID)
	}
	for i := range old {
		if kid := old[i].KeyID; kid != "" && !knownKid(kid, keys) {
			if s.retired == nil || len(s.retired) >= maxRetiredKids {
				s.retired = map[string]bool{}
			}
			s.retired[kid] = true
		}
	}
}

// fetchTimeout bounds a fetch whatever the client's own timeout.
const fetchTimeout = 30 * time.Second

// fetch requests the key set once.
func (s *keySet) fetch() ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("key set: %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read key set: %w", err)
	}
	if len(body) > maxKeySetBytes {
		return nil, fmt.Errorf("key set larger than %d bytes", maxKeySetBytes)
	}
	return parseKeySet(body)
}

// parseKeySet decodes a JWKS, skipping the keys of algorithms or types it cannot use (RFC 7517
// section 5: implementations should ignore them) rather than refusing the whole set.
func parseKeySet(body []byte) ([]jose.JSONWebKey, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, k := range raw.Keys {
		var meta struct {
			Alg string `json:"alg"`
		}
		if err := json.Unmarshal(k, &meta); err != nil {
			return nil, fmt.Errorf("key set: %w", err)
		}
		if meta.Alg != "" && !signingAlgs[meta.Alg] {
			continue
		}
		var jwk jose.JSONWebKey
		if err := json.Unmarshal(k, &jwk); err != nil {
			if errors.Is(err, jose.ErrUnsupportedKeyType) {
				continue
			}
			return nil, fmt.Errorf("key set: %w", err)
		}
		keys = append(keys, jwk)
	}
	return keys, nil
}

// signingAlgs are the algorithms go-oidc verifies (its own list is not exported).
var signingAlgs = map[string]bool{
	oidc.RS256: true, oidc.RS384: true, oidc.RS512: true, oidc.ES256: true, oidc.ES384: true,
	oidc.ES512: true, oidc.PS256: true, oidc.PS384: true, oidc.PS512: true, oidc.EdDSA: true,
}

// load fetches the key set unless a fetch since the caller's call has already ended, and
// fails when it fails or holds no key the verifier can use.
func (s *keySet) load(ctx context.Context) error {
	s.mu.Lock()
	seen := s.started
	s.mu.Unlock()
	keys, err := s.fresh(ctx, seen, "")
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return errors.New("the key set has no key of a supported algorithm")
	}
	return nil
}
