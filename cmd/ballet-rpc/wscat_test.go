package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// wscatPath finds the wscat the spec names for debugging: $BALLET_WSCAT, or
// the copy installed under .ci/node_modules of the repository.
func wscatPath(t *testing.T) string {
	if p := os.Getenv("BALLET_WSCAT"); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("repository root not found")
		}
		dir = parent
	}
	p := filepath.Join(dir, ".ci", "node_modules", ".bin", "wscat")
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("wscat not found at %s (npm install --prefix .ci wscat, or set BALLET_WSCAT)", p)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// A developer's session with wscat -s ballet.v1.json, typed line by line:
// auth, system.ping, stream.subscribe, then an event inserted with plain
// SQL arrives.
func TestWscat(t *testing.T) {
	bin := wscatPath(t)
	env := startEnv(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cmd := exec.CommandContext(ctx, bin, "-c", env.URL, "-s", "ballet.v1.json")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	defer func() {
		stdin.Close() // wscat exits when its input ends
		select {
		case <-readDone:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-readDone
		}
		_ = cmd.Wait()
	}()

	send := func(v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			t.Fatalf("write to wscat: %v", err)
		}
	}
	// next returns the next message that matches, or nil after wait.
	next := func(wait time.Duration, match func(map[string]any) bool) map[string]any {
		t.Helper()
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("wscat ended; stderr: %s", stderr.String())
				}
				// Without a terminal wscat prints each message on a line of
				// its own, after the "> " prompt it shows once per line read.
				for strings.HasPrefix(l, "> ") {
					l = l[2:]
				}
				if l == "" || l == ">" {
					continue
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("wscat printed %q: %v", l, err)
				}
				if match(m) {
					return m
				}
			case <-timer.C:
				return nil
			}
		}
	}
	byID := func(id float64) func(map[string]any) bool {
		return func(m map[string]any) bool { return m["id"] == id }
	}

	// wscat reads its input only once connected, and says nothing when it
	// is: send auth until it is answered (a repeat is answered with an
	// error, which is ignored).
	auth := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "auth", "params": map[string]any{"token": env.Token(t, "alice")}}
	var res map[string]any
	for deadline := time.Now().Add(time.Minute); res == nil && time.Now().Before(deadline); {
		send(auth)
		if res = next(500*time.Millisecond, byID(1)); res != nil {
			break
		}
	}
	if res == nil {
		t.Fatalf("no answer to auth; stderr: %s", stderr.String())
	}
	if r, _ := res["result"].(map[string]any); r["subject"] != "alice" || r["expires_at"] == nil {
		t.Fatalf("auth: %v", res)
	}

	send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "system.ping", "params": map[string]any{}})
	res = next(30*time.Second, byID(2))
	if r, _ := res["result"].(map[string]any); r["subject"] != "alice" || r["time"] == nil {
		t.Fatalf("system.ping: %v", res)
	}

	send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "stream.subscribe",
		"params": map[string]any{"subscription": "s1", "stream": "project:WEB"}})
	res = next(30*time.Second, byID(3))
	if r, _ := res["result"].(map[string]any); r["subscription"] != "s1" || r["seq"] == nil {
		t.Fatalf("stream.subscribe: %v", res)
	}

	// Any Core component appends with plain SQL.
	pool, err := pgxpool.New(ctx, env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload)
		VALUES ('WEB', 'item.state_changed', 'item', '0199', 'WEB-42', 'human', 'alice', '{"from":"backlog","to":"ready"}')`); err != nil {
		t.Fatal(err)
	}
	ev := next(30*time.Second, func(m map[string]any) bool { return m["method"] == "stream.event" })
	if ev == nil {
		t.Fatal("no stream.event within 30s")
	}
	p, _ := ev["params"].(map[string]any)
	payload, _ := p["payload"].(map[string]any)
	actor, _ := p["actor"].(map[string]any)
	if _, hasID := ev["id"]; hasID || ev["jsonrpc"] != "2.0" || p["subscription"] != "s1" || p["type"] != "item.state_changed" ||
		p["entity_key"] != "WEB-42" || payload["to"] != "ready" || actor["subject"] != "alice" || p["seq"] == nil {
		t.Fatalf("stream.event: %v", ev)
	}
}
