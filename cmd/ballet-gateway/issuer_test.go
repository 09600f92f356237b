package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/streams/pgtest"
)

// TestServeStartsWithoutIssuer: a replica whose OIDC issuer refuses connections starts, fails
// /readyz naming the issuer and refuses tokens (-32001 then 4001 on /rpc, 503 on REST); once
// the issuer answers on that address, the same process loads its keys and authenticates.
func TestServeStartsWithoutIssuer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the issuer's address now refuses connections
	iss, err := auth.NewIssuer("http://"+addr+authtest.IssuerPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, db: pgtest.URL(t), iss: iss}
	c.env = []string{
		"BALLET_DATABASE_URL=" + c.db, "BALLET_OIDC_ISSUER=" + iss.URL(), "BALLET_OIDC_AUDIENCE=ballet",
		"BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0",
	}
	c.run("migrate")
	c.run("admin", "project-create", "WEB", "Web site")
	c.run("admin", "grant", "WEB", "alice", "admin")
	r := c.serve()

	waitReady(t, r, http.StatusServiceUnavailable, iss.URL())
	failures := regexp.MustCompile(`(?m)^ballet_gateway_oidc_discovery_failures_total (\S+)$`)
	waitFor(t, func() bool {
		_, body := adminGet(t, r, "/metrics")
		m := failures.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no ballet_gateway_oidc_discovery_failures_total:\n%s", grepLines(body, "oidc"))
		}
		n, _ := strconv.ParseFloat(m[1], 64)
		return n > 0 && strings.Contains(body, "\nballet_gateway_oidc_issuer_loaded 0\n")
	})

	// /rpc: the token is refused with -32001 and the connection closed with 4001.
	ws := wsDial(t, "ws://"+r.addr+"/rpc", codec.JSON)
	if got := callErr(t, ws, 1, "auth", map[string]string{"token": c.token("alice")}); !strings.HasPrefix(got, "-32001 ") ||
		!strings.Contains(got, "unavailable") {
		t.Fatalf("auth while the issuer is down: %q, want -32001 (unavailable)", got)
	}
	if code, _ := closedBy(t, ws); code != 4001 {
		t.Fatalf("close %d, want 4001", code)
	}
	// REST: 503, a failure of the server's, not the client's token.
	if code := restGet(t, r.addr, c.token("alice"), "/api/v1/projects"); code != http.StatusServiceUnavailable {
		t.Fatalf("REST while the issuer is down: %d, want 503", code)
	}

	// The issuer comes up on its address; the replica loads it without a restart.
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the issuer's address was taken meanwhile: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(authtest.IssuerPath+"/", iss)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	waitReady(t, r, http.StatusOK, "")
	k := c.dialJSON(r, "alice")
	k.call("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"})
	if code := restGet(t, r.addr, c.token("alice"), "/api/v1/projects"); code != http.StatusOK {
		t.Fatalf("REST once the issuer is up: %d, want 200", code)
	}
	if _, body := adminGet(t, r, "/metrics"); !strings.Contains(body, "\nballet_gateway_oidc_issuer_loaded 1\n") {
		t.Fatalf("ballet_gateway_oidc_issuer_loaded is not 1:\n%s", grepLines(body, "oidc"))
	}
}

// callErr sends one request and returns its error as "code message" ("" on success).
func callErr(t *testing.T, ws *websocket.Conn, id int, method string, params any) string {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
		t.Fatal(err)
	}
	for {
		m := readFrame(t, ws)
		if m["method"] != nil {
			continue
		}
		if e, ok := m["error"].(map[string]any); ok {
			return strconv.FormatFloat(e["code"].(float64), 'f', -1, 64) + " " + e["message"].(string)
		}
		return ""
	}
}

func restGet(t *testing.T, addr, token, path string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
