// Package authtest runs a development OIDC issuer on a loopback server for
// tests that need real access tokens.
package authtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ballet/gateway/auth"
)

// IssuerPath is the path of the issuer URL on the test server.
const IssuerPath = "/oidc"

// NewIssuer starts an httptest server serving a fresh Issuer at IssuerPath
// and closes it when the test ends.
func NewIssuer(t testing.TB) *auth.Issuer {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	iss, err := auth.NewIssuer(srv.URL+IssuerPath, nil)
	if err != nil {
		t.Fatalf("authtest: %v", err)
	}
	mux.Handle(IssuerPath+"/", iss)
	return iss
}

// NewVerifier returns a Verifier for iss and audience with default options.
func NewVerifier(t testing.TB, iss *auth.Issuer, audience string) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(context.Background(), iss.URL(), audience, nil)
	if err != nil {
		t.Fatalf("authtest: %v", err)
	}
	return v
}

// Mint returns a token for subject, failing the test on error.
func Mint(t testing.TB, iss *auth.Issuer, subject string, o auth.TokenOptions) string {
	t.Helper()
	tok, err := iss.Mint(subject, o)
	if err != nil {
		t.Fatalf("authtest: %v", err)
	}
	return tok
}
