package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTokenFromCmd(t *testing.T) {
	ctx := context.Background()
	if tok, err := TokenFromCmd(ctx, "echo '  abc.def  '"); err != nil || tok != "abc.def" {
		t.Fatalf("got %q, %v", tok, err)
	}
	if _, err := TokenFromCmd(ctx, "true"); err == nil || !strings.Contains(err.Error(), "printed no token") {
		t.Fatalf("no output: %v", err)
	}
	if _, err := TokenFromCmd(ctx, "echo nope >&2; exit 3"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("failing command: %v", err)
	}
}

func TestTokenFromURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte(`{"token":"t0k"}`))
		case "/empty":
			w.Write([]byte(`{"other":1}`))
		default:
			http.Error(w, "no such subject", http.StatusForbidden)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if tok, err := TokenFromURL(ctx, "--token-url", srv.URL+"/ok"); err != nil || tok != "t0k" {
		t.Fatalf("got %q, %v", tok, err)
	}
	if _, err := TokenFromURL(ctx, "--token-url", srv.URL+"/empty"); err == nil ||
		!strings.Contains(err.Error(), `"token" field`) {
		t.Fatalf("no token field: %v", err)
	}
	if _, err := TokenFromURL(ctx, "--x", srv.URL+"/denied"); err == nil ||
		!strings.Contains(err.Error(), "--x: 403 Forbidden: no such subject") {
		t.Fatalf("refused: %v", err)
	}
}
