package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/codec"
)

// restStatus is the status of method path on r's client port with token.
func (c *cluster) restStatus(r *replica, method, path, token string) int {
	c.t.Helper()
	status, _ := c.rest(r, method, path, token)
	return status
}

// rest is the status and the body of method path on r's client port with token.
func (c *cluster) rest(r *replica, method, path, token string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, "http://"+r.addr+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// authError is the error auth answers token with on r ("" when it is accepted).
func (c *cluster) authError(r *replica, token string) string {
	c.t.Helper()
	ws := wsDial(c.t, "ws://"+r.addr+"/rpc", codec.JSON)
	defer ws.CloseNow()
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "auth", "params": map[string]string{"token": token}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
		c.t.Fatal(err)
	}
	for {
		m := readFrame(c.t, ws)
		if m["method"] != nil {
			continue
		}
		if e, ok := m["error"].(map[string]any); ok {
			return fmt.Sprint(e["code"], " ", e["message"])
		}
		return ""
	}
}

// closedBy waits for ws to be closed and returns its close code and when.
func closedBy(t *testing.T, ws *websocket.Conn) (websocket.StatusCode, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			return websocket.CloseStatus(err), time.Now()
		}
	}
}

// TestServeOperatorAcrossReplicas: with two serve processes on one database, a sign-out
// through one closes the subject's connections on both within 2 s; a replica started after it
// refuses the old token at auth and on REST, and accepts a later one; a block from the command
// line refuses even that, on every replica, until unblocked; every action is in the log.
func TestServeOperatorAcrossReplicas(t *testing.T) {
	c := newCluster(t, 2)
	old := c.token("alice")
	conns := []*jsonClient{c.dialJSON(c.replicas[0], "alice"), c.dialJSON(c.replicas[1], "alice")}
	t0 := time.Now()
	if s := c.restStatus(c.replicas[0], "POST", "/api/v1/admin/subjects/alice/sign-out", c.token("root")); s != http.StatusNoContent {
		t.Fatalf("sign-out: %d", s)
	}
	for i, k := range conns {
		code, at := closedBy(t, k.ws)
		if code != 4001 || at.Sub(t0) > 2*time.Second {
			t.Fatalf("replica %d: close %d after %v, want 4001 within 2s", i, code, at.Sub(t0))
		}
	}

	p := start(t, c.env, "serve")
	late := &replica{p: p, addr: p.waitLine(t, listenRe)}
	if e := c.authError(late, old); !strings.Contains(e, "-32001") || !strings.Contains(e, "signed_out") {
		t.Fatalf("a replica started after the sign-out: auth with the old token: %q", e)
	}
	if s := c.restStatus(late, "GET", "/api/v1/projects", old); s != http.StatusUnauthorized {
		t.Fatalf("a replica started after the sign-out: REST with the old token: %d", s)
	}
	time.Sleep(time.Until(time.Unix(time.Now().Unix()+1, 10e6)))
	fresh := c.token("alice")
	if e := c.authError(late, fresh); e != "" {
		t.Fatalf("a token issued after the sign-out: %s", e)
	}

	onLate := c.dialJSON(late, "alice")
	c.run("admin", "block", "alice")
	if code, _ := closedBy(t, onLate.ws); code != 4001 {
		t.Fatalf("after admin block: close %d", code)
	}
	for _, r := range append(c.replicas, late) {
		// Applied as each replica's tailer reads the event.
		waitFor(t, func() bool { return strings.Contains(c.authError(r, fresh), "blocked") })
	}
	c.run("admin", "unblock", "alice")
	for _, r := range append(c.replicas, late) {
		waitFor(t, func() bool { return c.authError(r, fresh) == "" })
		if s := c.restStatus(r, "GET", "/api/v1/projects", fresh); s != http.StatusOK {
			t.Fatalf("after admin unblock: REST %d", s)
		}
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT type || ' ' || actor_subject || ' ' || (payload->>'subject') || ' ' || (payload->>'admin')
		FROM events WHERE project_key = '' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"subject.signed_out root alice root", "subject.blocked ballet-gateway admin alice ballet-gateway admin",
		"subject.unblocked ballet-gateway admin alice ballet-gateway admin"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the log's operator events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
