package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The first matching rule plays; a human message after a turn that stored no
// answer reaches the model together with the earlier one, so "hello" comes first.
const slowScript = `{"chunk": 4, "rules": [
 {"match": "hello", "steps": [[{"text": "Hello from the planner."}]]},
 {"match": "slow", "steps": [[{"text": "Thinking it over"}, {"pause_ms": 60000}, {"text": "never"}]]},
 {"match": "", "steps": [[{"text": "Hello from the planner."}]]}
]}`

func plannerCluster(t *testing.T) *cluster {
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(slowScript), 0o644); err != nil {
		t.Fatal(err)
	}
	return newCluster(t, 3, "BALLET_PLANNER_PROVIDER=scripted", "BALLET_PLANNER_SCRIPT="+script)
}

func (c *cluster) session(r *replica, token string) string {
	c.t.Helper()
	req, _ := http.NewRequest("POST", "http://"+r.addr+"/api/v1/projects/WEB/planner/sessions", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var s struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != 201 || json.Unmarshal(b, &s) != nil {
		c.t.Fatalf("create session: %d %s", resp.StatusCode, b)
	}
	return s.ID
}

// outputs reads planner.output notifications until done; it returns them as
// "type:text" strings.
func (k *jsonClient) outputs() []string {
	k.t.Helper()
	var outs []string
	for {
		m := readJSON(k.t, k.ws)
		if m["method"] != "planner.output" {
			continue
		}
		p := m["params"].(map[string]any)
		outs = append(outs, fmt.Sprint(p["type"], ":", p["text"]))
		if p["type"] == "done" {
			return outs
		}
	}
}

func (k *jsonClient) callErr(method string, params any) float64 {
	k.t.Helper()
	k.id++
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": k.id, "method": method, "params": params})
	if err := k.ws.Write(context.Background(), websocket.MessageText, req); err != nil {
		k.t.Fatal(err)
	}
	for {
		m := readFrame(k.t, k.ws)
		if m["method"] != nil {
			stashed[k.ws] = append(stashed[k.ws], m)
			continue
		}
		if e, ok := m["error"].(map[string]any); ok {
			return e["code"].(float64)
		}
		return 0
	}
}

// TestPlannerAcrossReplicas: a turn runs on A; B refuses a second send with
// -32009; a cancel sent to C stops it; watchers on all three see the same
// output and one done. Then the replica running a turn is killed: after its
// lease expires the others' watchers get error + done within about 4 s (4/3 of
// the default lease; the check allows 10 s more for a loaded machine), and the
// session accepts the next send.
func TestPlannerAcrossReplicas(t *testing.T) {
	c := plannerCluster(t)
	a, b, cc := c.replicas[0], c.replicas[1], c.replicas[2]
	tok := c.token("alice")
	session := c.session(a, tok)
	var watchers []*jsonClient
	for _, r := range c.replicas {
		k := c.dialJSON(r, "alice")
		k.call("planner.watch", map[string]any{"subscription": "w", "session": session})
		watchers = append(watchers, k)
	}
	onA, onB, onC := c.dialJSON(a, "alice"), c.dialJSON(b, "alice"), c.dialJSON(cc, "alice")
	onA.call("planner.send", map[string]any{"session": session, "text": "a slow question"})
	time.Sleep(300 * time.Millisecond)
	if code := onB.callErr("planner.send", map[string]any{"session": session, "text": "me too"}); code != -32009 {
		t.Fatalf("send on B while A runs: %v, want -32009", code)
	}
	onC.call("planner.cancel", map[string]any{"session": session})
	var first []string
	for i, k := range watchers {
		outs := k.outputs()
		if outs[len(outs)-1] != "done:cancelled" {
			t.Fatalf("watcher %d: %v", i, outs)
		}
		if i == 0 {
			first = outs
		} else if strings.Join(outs, "|") != strings.Join(first, "|") {
			t.Fatalf("watcher %d saw %v, watcher 0 saw %v", i, outs, first)
		}
	}

	// Kill the replica that runs the next turn.
	onA.call("planner.send", map[string]any{"session": session, "text": "slow again"})
	time.Sleep(300 * time.Millisecond)
	if err := a.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica B:\n%s", b.p.output())
		}
	})
	for i, k := range watchers[1:] {
		outs := k.outputs()
		n := len(outs)
		if n < 2 || outs[n-1] != "done:error" || !strings.HasPrefix(outs[n-2], "error:") {
			t.Fatalf("watcher on replica %d after the kill: %v", i+1, outs)
		}
	}
	if took := time.Since(killed); took > 4*time.Second+10*time.Second {
		t.Fatalf("watchers heard of the dead turn %v after the kill, more than 14 s", took)
	} else {
		t.Logf("error and done %v after the kill", took)
	}
	onB.call("planner.send", map[string]any{"session": session, "text": "hello"})
	if outs := watchers[2].outputs(); outs[len(outs)-1] != "done:end_turn" {
		t.Fatalf("turn after the takeover: %v", outs)
	}
}

// next reads k's next notification for subscription sub, or returns nil after d.
func (k *jsonClient) next(sub string, d time.Duration) map[string]any {
	k.t.Helper()
	deadline := time.Now().Add(d)
	for {
		var m map[string]any
		if q := stashed[k.ws]; len(q) > 0 {
			m, stashed[k.ws] = q[0], q[1:]
		} else {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			_, data, err := k.ws.Read(ctx)
			cancel()
			if err != nil {
				if time.Now().Before(deadline) {
					k.t.Fatal(err)
				}
				return nil
			}
			if err := json.Unmarshal(data, &m); err != nil {
				k.t.Fatal(err)
			}
		}
		if p, ok := m["params"].(map[string]any); ok && p["subscription"] == sub {
			return m
		}
	}
}

// TestRevocationEndsWatchesOnEveryReplica: bob and alice watch a session on B while a
// turn streams; alice revokes bob through REST on A. Bob's watch on B gets stream.closed
// forbidden and no planner.output after it; alice's goes on.
func TestRevocationEndsWatchesOnEveryReplica(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	text := strings.Repeat("x", 2000)
	if err := os.WriteFile(script, []byte(`{"chunk": 1, "chunk_pause_ms": 5, "rules": [
		{"match": "", "steps": [[{"text": "`+text+`"}]]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 2, "BALLET_PLANNER_PROVIDER=scripted", "BALLET_PLANNER_SCRIPT="+script)
	a, b := c.replicas[0], c.replicas[1]
	tok := c.token("alice")
	session := c.session(a, tok)
	watch := map[string]any{"subscription": "w", "session": session}
	bobB, aliceB := c.dialJSON(b, "bob"), c.dialJSON(b, "alice")
	bobB.call("planner.watch", watch)
	aliceB.call("planner.watch", watch)
	c.dialJSON(a, "alice").call("planner.send", map[string]any{"session": session, "text": "go"})
	outputs := func(k *jsonClient, who string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			m := k.next("w", 30*time.Second)
			if m == nil || m["method"] != "planner.output" {
				t.Fatalf("%s: %v after %d outputs, want planner.output", who, m, i)
			}
		}
	}
	outputs(bobB, "bob", 3)

	req, _ := http.NewRequest("DELETE", "http://"+a.addr+"/api/v1/projects/WEB/members/bob", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("revoke: %v %v", err, resp)
	}
	resp.Body.Close()
	for {
		m := bobB.next("w", 30*time.Second)
		if m == nil {
			t.Fatal("bob's watch on B was not closed")
		}
		if m["method"] == "stream.closed" {
			if r := m["params"].(map[string]any)["reason"]; r != "forbidden" {
				t.Fatalf("bob's watch on B closed %v, want forbidden", r)
			}
			break
		}
	}
	if m := bobB.next("w", 300*time.Millisecond); m != nil {
		t.Fatalf("bob after stream.closed: %v", m)
	}
	outputs(aliceB, "alice", 20)
}
