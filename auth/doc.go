// Package auth verifies OIDC access tokens and decides what a caller may do.
//
// A Verifier discovers an issuer once (NewVerifier), then checks JWT access
// tokens through go-oidc: signature against the issuer's JWKS (fetched on
// first use and refetched when a token names an unknown key id, at most once
// per VerifierOptions.KeyRefreshInterval), iss, aud and exp. The result is a
// Principal; every failure wraps ErrInvalidToken and Reason names its class
// for metrics. Roles map to permissions with Role.Has.
//
// Issuer is a small but real OIDC issuer (discovery, JWKS, RS256 tokens, key
// rotation) for development mode and tests; it is not for production.
// Package authtest starts one on a loopback server.
package auth
