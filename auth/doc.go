// Package auth verifies OIDC access tokens and decides what a caller may do.
//
// A Verifier discovers an issuer once (NewVerifier), then checks JWT access
// tokens through go-oidc (alg, iss, aud, exp) with its own key set for the
// signature (keyset.go): the issuer's JWKS, fetched on first use and again when
// the cached keys do not verify a token, one fetch at a time and at most one
// per VerifierOptions.KeyRefreshInterval; a fetch's keys replace the cache as
// it ends, and a token waits for a fetch begun after its key was missed (past
// the interval's end, if need be). The
// result is a Principal; every failure wraps ErrInvalidToken and Reason names
// its class for metrics. Roles map to permissions with Role.Has.
//
// Issuer is a small but real OIDC issuer (discovery, JWKS, RS256 tokens, key
// rotation) for development mode and tests; it is not for production.
// Package authtest starts one on a loopback server.
package auth
