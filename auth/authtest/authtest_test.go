package authtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
)

func TestIssuerRoundTrip(t *testing.T) {
	iss := authtest.NewIssuer(t)
	if !strings.HasSuffix(iss.URL(), authtest.IssuerPath) || !strings.HasPrefix(iss.URL(), "http://127.0.0.1:") {
		t.Errorf("issuer URL %s", iss.URL())
	}
	v := authtest.NewVerifier(t, iss, "ballet-gateway")
	tok := authtest.Mint(t, iss, "alice", auth.TokenOptions{Audience: []string{"ballet-gateway"}, ClientID: "web-ui"})
	p, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "alice" || p.ClientID != "web-ui" || !p.Human {
		t.Errorf("principal %+v", *p)
	}
}
