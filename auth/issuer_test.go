package auth_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/ballet/gateway/auth"
)

func get(t *testing.T, method, url string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

func fetchJWKS(t *testing.T, url string) jose.JSONWebKeySet {
	t.Helper()
	status, _, body := get(t, http.MethodGet, url)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d", url, status)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		t.Fatalf("JWKS %s: %v", body, err)
	}
	return set
}

func TestIssuerDiscovery(t *testing.T) {
	iss := startIssuer(t, nil)
	status, header, body := get(t, http.MethodGet, iss.URL()+auth.DiscoveryPath)
	if status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		t.Fatalf("discovery: %d %s", status, header.Get("Content-Type"))
	}
	var doc struct {
		Issuer        string   `json:"issuer"`
		JWKSURI       string   `json:"jwks_uri"`
		Algs          []string `json:"id_token_signing_alg_values_supported"`
		ResponseTypes []string `json:"response_types_supported"`
		SubjectTypes  []string `json:"subject_types_supported"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Issuer != iss.URL() || doc.JWKSURI != iss.URL()+auth.JWKSPath ||
		len(doc.Algs) != 1 || doc.Algs[0] != "RS256" || len(doc.ResponseTypes) == 0 || len(doc.SubjectTypes) == 0 {
		t.Fatalf("discovery document %s", body)
	}

	for _, path := range []string{auth.JWKSPath, "/keys"} {
		set := fetchJWKS(t, iss.URL()+path)
		if len(set.Keys) != 1 {
			t.Fatalf("%s: %d keys", path, len(set.Keys))
		}
		k := set.Keys[0]
		if k.KeyID != iss.KeyID() || k.Algorithm != "RS256" || k.Use != "sig" || !k.IsPublic() {
			t.Errorf("%s: key kid %q alg %q use %q public %v", path, k.KeyID, k.Algorithm, k.Use, k.IsPublic())
		}
	}

	if status, _, body := get(t, http.MethodHead, iss.URL()+auth.DiscoveryPath); status != http.StatusOK || len(body) != 0 {
		t.Errorf("HEAD discovery: %d, %d body bytes", status, len(body))
	}
	if status, header, _ := get(t, http.MethodPost, iss.URL()+auth.JWKSPath); status != http.StatusMethodNotAllowed || header.Get("Allow") == "" {
		t.Errorf("POST jwks: %d, Allow %q", status, header.Get("Allow"))
	}
	for _, path := range []string{"/dev/oidc", "/dev/oidc/token", "/dev/oidc/jwks/x", "/dev/oidcx/jwks"} {
		if status, _, _ := get(t, http.MethodGet, iss.srv.URL+path); status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, status)
		}
	}
}

func TestIssuerMountedWithStripPrefix(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	iss, err := auth.NewIssuer(srv.URL+"/dev/oidc", nil)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/dev/oidc/", http.StripPrefix("/dev/oidc", iss))
	v := newVerifier(t, iss.URL(), nil)
	tok, err := iss.Mint("alice", auth.TokenOptions{Audience: []string{audience}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
}

func TestIssuerRotateJWKS(t *testing.T) {
	iss := startIssuer(t, nil)
	kids := []string{iss.KeyID()}
	for range 2 {
		if err := iss.Rotate(); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, iss.KeyID())
		set := fetchJWKS(t, iss.URL()+auth.JWKSPath)
		n := len(kids)
		if len(set.Keys) != 2 || set.Keys[0].KeyID != kids[n-1] || set.Keys[1].KeyID != kids[n-2] {
			var got []string
			for _, k := range set.Keys {
				got = append(got, k.KeyID)
			}
			t.Fatalf("JWKS kids %q, want current %q then previous %q", got, kids[n-1], kids[n-2])
		}
	}
}

func TestMintClaims(t *testing.T) {
	clock := newFakeClock()
	iss := startIssuer(t, &auth.IssuerOptions{Now: clock.Now})
	set := fetchJWKS(t, iss.URL()+auth.JWKSPath)

	decode := func(tok string) (jose.Header, map[string]any) {
		t.Helper()
		jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
		if err != nil {
			t.Fatal(err)
		}
		payload, err := jws.Verify(&set.Keys[0])
		if err != nil {
			t.Fatal(err)
		}
		var claims map[string]any
		if err := json.Unmarshal(payload, &claims); err != nil {
			t.Fatal(err)
		}
		return jws.Signatures[0].Header, claims
	}

	tok := iss.mint(t, "svc", auth.TokenOptions{ClientID: "svc", TTL: 5 * time.Minute, Extra: map[string]any{"scope": "tracker"}})
	header, c := decode(tok)
	if header.KeyID != iss.KeyID() || header.ExtraHeaders["typ"] != "at+jwt" {
		t.Errorf("header kid %q typ %v", header.KeyID, header.ExtraHeaders["typ"])
	}
	now := float64(clock.Now().Unix())
	want := map[string]any{
		"iss": iss.URL(), "sub": "svc", "aud": audience, "client_id": "svc", "azp": "svc", "scope": "tracker",
		"iat": now, "nbf": now, "exp": now + 300,
	}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("claim %s = %v, want %v", k, c[k], v)
		}
	}
	if jti, _ := c["jti"].(string); jti == "" {
		t.Error("no jti")
	}
	_, c2 := decode(iss.mint(t, "svc", auth.TokenOptions{}))
	if c2["jti"] == c["jti"] {
		t.Error("jti repeated")
	}

	_, c = decode(iss.mint(t, "alice", auth.TokenOptions{Audience: []string{"a", "b"}, Extra: map[string]any{"nbf": nil}}))
	if aud, _ := c["aud"].([]any); len(aud) != 2 || aud[0] != "a" || aud[1] != "b" {
		t.Errorf("aud = %v", c["aud"])
	}
	if _, ok := c["nbf"]; ok {
		t.Error("nil Extra value kept the claim")
	}
	if c["exp"] != now+3600 {
		t.Errorf("default TTL: exp %v, want %v", c["exp"], now+3600)
	}
	for _, k := range []string{"client_id", "azp"} {
		if _, ok := c[k]; ok {
			t.Errorf("claim %s set without ClientID", k)
		}
	}
	_, c = decode(iss.mint(t, "alice", auth.TokenOptions{Audience: []string{}}))
	if _, ok := c["aud"]; ok {
		t.Error("aud set for an empty Audience")
	}
	if _, err := iss.Mint("", auth.TokenOptions{}); err == nil {
		t.Error("Mint with an empty subject succeeded")
	}
}

func TestNewIssuerErrors(t *testing.T) {
	for _, url := range []string{"", "localhost:8080", "ftp://example.com/oidc", "http://", "http://x/oidc?a=1", "http://x/oidc#f", "http://x/%zz"} {
		if _, err := auth.NewIssuer(url, nil); err == nil {
			t.Errorf("NewIssuer(%q) succeeded", url)
		}
	}
	if _, err := auth.NewIssuer("http://127.0.0.1:1/oidc", &auth.IssuerOptions{KeyBits: 1024}); err == nil {
		t.Error("1024-bit key accepted")
	}
}
