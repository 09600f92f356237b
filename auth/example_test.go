package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ballet/gateway/auth"
)

// A development issuer mounted under /dev/oidc, and a verifier that trusts it.
func Example() {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()

	iss, err := auth.NewIssuer(srv.URL+"/dev/oidc", nil)
	if err != nil {
		panic(err)
	}
	mux.Handle("/dev/oidc/", iss)

	v, err := auth.NewVerifier(context.Background(), iss.URL(), "ballet-gateway", nil)
	if err != nil {
		panic(err)
	}
	tok, _ := iss.Mint("ci-bot", auth.TokenOptions{Audience: []string{"ballet-gateway"}, ClientID: "ci-bot"})
	p, err := v.Verify(context.Background(), tok)
	fmt.Println(p.Subject, p.Human, err)

	_, err = v.Verify(context.Background(), "not a token")
	fmt.Println(auth.Reason(err))
	// Output:
	// ci-bot false <nil>
	// malformed
}
