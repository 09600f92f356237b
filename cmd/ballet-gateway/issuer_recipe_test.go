package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/streams/pgtest"
)

// TestServeWithDevIssuer follows docs/identity-provider.md's try-out: `serve` trusts the
// issuer of a running `dev` (BALLET_OIDC_ISSUER=http://ADDR/dev/oidc, audience ballet-dev),
// and a token from dev's /dev/token authenticates on serve's /rpc, through go-oidc's discovery
// and key set like any issuer's.
func TestServeWithDevIssuer(t *testing.T) {
	dev := start(t, []string{"BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0"}, "dev")
	devURL := strings.Replace(strings.TrimSuffix(dev.waitLine(t, wsURLRe), "/rpc"), "ws://", "http://", 1)
	env := []string{
		"BALLET_DATABASE_URL=" + pgtest.URL(t), "BALLET_OIDC_ISSUER=" + devURL + "/dev/oidc",
		"BALLET_OIDC_AUDIENCE=ballet-dev", "BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0",
	}
	for _, args := range [][]string{{"migrate"}, {"admin", "project-create", "WEB", "Web site"}, {"admin", "grant", "WEB", "alice", "member"}} {
		if p := start(t, env, args...); p.wait(t, 60*time.Second) != 0 {
			t.Fatalf("%v:\n%s", args, p.output())
		}
	}
	srv := start(t, env, "serve")
	addr := srv.waitLine(t, listenRe)

	resp, err := http.Get(devURL + "/dev/token?subject=" + url.QueryEscape("alice"))
	if err != nil {
		t.Fatal(err)
	}
	var minted struct {
		Token string `json:"token"`
	}
	err = json.NewDecoder(resp.Body).Decode(&minted)
	resp.Body.Close()
	if err != nil || minted.Token == "" {
		t.Fatalf("GET /dev/token: %d, %v", resp.StatusCode, err)
	}
	ws := wsDial(t, "ws://"+addr+"/rpc", codec.JSON)
	res := rpcCall(t, ws, 1, "auth", map[string]string{"token": minted.Token})
	if res["result"].(map[string]any)["subject"] != "alice" {
		t.Fatalf("auth on serve with dev's token: %v", res)
	}
	rpcCall(t, ws, 2, "stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"})
}
