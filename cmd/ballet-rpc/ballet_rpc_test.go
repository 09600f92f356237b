package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/internal/cli"
	"github.com/ballet/gateway/streams"
)

func TestUsage(t *testing.T) {
	tok := map[string]string{"BALLET_TOKEN": "t"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no command", tok, nil, "no command given"},
		{"unknown command", tok, []string{"dance"}, `unknown command "dance"`},
		{"no token", nil, []string{"ping"}, "no token"},
		{"two tokens", nil, []string{"--token", "a", "--token-cmd", "echo b", "ping"}, "exclude each other"},
		{"two codecs", tok, []string{"--json", "--msgpack", "ping"}, "exclude each other"},
		{"missing stream", tok, []string{"subscribe"}, "wrong number of arguments"},
		{"extra argument", tok, []string{"ping", "pong"}, "wrong number of arguments"},
		{"send without text", tok, []string{"send", "s1"}, "wrong number of arguments"},
		{"bad params", tok, []string{"call", "system.ping", "{nope"}, "not JSON"},
		{"params not UTF-8", tok, []string{"call", "system.ping", "{\"pad\":\"\xff\xfe\"}"}, "not UTF-8"},
		{"bad from-seq", tok, []string{"subscribe", "project:WEB", "--from-seq", "x"}, "non-negative integer"},
		{"from-seq elsewhere", tok, []string{"ping", "--from-seq", "1"}, "--from-seq is for subscribe"},
		{"unknown flag", tok, []string{"--verbose", "ping"}, "flag provided but not defined"},
		{"unknown transport", tok, []string{"--transport", "smoke", "ping"}, "want auto, websocket or http"},
		{"MessagePack over HTTP", tok, []string{"--transport", "http", "--msgpack", "ping"}, "JSON only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, tc.env, tc.args...)
			if r.code != cli.ExitUsage || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "usage:") {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Fatalf("stdout %q", r.stdout)
			}
		})
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := runCmd(t, nil, args...)
		if r.code != cli.ExitOK || !strings.HasPrefix(r.stdout, "usage: ballet-rpc") {
			t.Fatalf("%v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
	if r := runCmd(t, nil, "--version"); r.code != cli.ExitOK || !strings.HasPrefix(r.stdout, "ballet-rpc ") {
		t.Fatalf("--version: exit %d, stdout %q", r.code, r.stdout)
	}
}

func TestPing(t *testing.T) {
	env := startEnv(t, false)
	tok := env.Token(t, "alice")
	for _, codecFlag := range []string{"--json", "--msgpack", "--transport=http"} {
		t.Run(codecFlag, func(t *testing.T) {
			r := runCmd(t, nil, "--url", env.URL, "--token", tok, codecFlag, "ping")
			if r.code != cli.ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			if len(lines) != 1 {
				t.Fatalf("stdout %q", r.stdout)
			}
			m := decode(t, lines[0])
			if m["subject"] != "alice" || m["time"] == nil {
				t.Fatalf("result %v", m)
			}
		})
	}
	// Flags after the command, and the token from the environment.
	r := runCmd(t, map[string]string{"BALLET_TOKEN": tok}, "ping", "--url", env.URL)
	if r.code != cli.ExitOK || decode(t, strings.TrimSpace(r.stdout))["subject"] != "alice" {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestTokenCommand(t *testing.T) {
	env := startEnv(t, false)
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(env.Token(t, "bob")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, nil, "--url", env.URL, "--token-cmd", "cat "+file, "ping")
	if r.code != cli.ExitOK || decode(t, strings.TrimSpace(r.stdout))["subject"] != "bob" {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	r = runCmd(t, nil, "--url", env.URL, "--token-cmd", "echo no token here >&2; exit 7", "ping")
	if r.code != exitConn || !strings.Contains(r.stderr, "no token here") {
		t.Fatalf("failing token command: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestConnectionFailures(t *testing.T) {
	env := startEnv(t, false)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad token", []string{"--url", env.URL, "--token", "garbage", "ping"}, "error -32001"},
		{"not a gateway", []string{"--url", env.BaseURL + "/nothing", "--token", "x", "ping"}, "dial"},
		{"nothing listening", []string{"--url", "ws://127.0.0.1:1/rpc", "--token", "x", "ping"}, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, nil, tc.args...)
			if r.code != exitConn || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 3 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

func TestCall(t *testing.T) {
	env := startEnv(t, false)
	tok := env.Token(t, "alice")
	base := []string{"--url", env.URL, "--token", tok}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // a field of the result that must be there
		stderr string
	}{
		{"ping with params", []string{"call", "system.ping", "{}"}, cli.ExitOK, "subject", ""},
		{"ping without params", []string{"--json", "call", "system.ping"}, cli.ExitOK, "subject", ""},
		{"unknown method", []string{"call", "no.such.method"}, exitRPC, "", "error -32601"},
		{"invalid params", []string{"call", "stream.subscribe", `{"subscription":"x","stream":"bad"}`}, exitRPC, "", "error -32602"},
		{"forbidden", []string{"call", "stream.unsubscribe", `{"subscription":"none"}`}, exitRPC, "", "error -32004"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, nil, append(base, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.stderr)
			}
			if tc.stdout != "" {
				if m := decode(t, strings.TrimSpace(r.stdout)); m[tc.stdout] == nil {
					t.Fatalf("result %v", m)
				}
			} else if r.stdout != "" {
				t.Fatalf("stdout %q", r.stdout)
			}
		})
	}
}

func appendTicks(t testing.TB, env interface {
	Append(ctx context.Context, evs ...streams.NewEvent) (int64, error)
}, from, n int) int64 {
	t.Helper()
	evs := make([]streams.NewEvent, n)
	for i := range evs {
		evs[i] = streams.NewEvent{
			ProjectKey: "WEB", Type: "test.tick", EntityType: "item", EntityID: fmt.Sprint(from + i),
			EntityKey: fmt.Sprintf("WEB-%d", from+i), ActorKind: "human", ActorSubject: "alice",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, from+i)),
		}
	}
	last, err := env.Append(context.Background(), evs...)
	if err != nil {
		t.Fatal(err)
	}
	return last
}

func TestSubscribe(t *testing.T) {
	for _, codecFlag := range []string{"--json", "--msgpack", "--transport=http"} {
		t.Run(codecFlag, func(t *testing.T) {
			env := startEnv(t, true)
			d := startDropper(t, env.HTTP.Listener.Addr().String())
			tok := env.Token(t, "alice")
			r := start(t, nil, "--url", d.url(), "--token", tok, codecFlag, "subscribe", "project:WEB")
			first := decode(t, r.waitLines(t, 1)[0])
			if first["subscription"] == nil || first["seq"] == nil {
				t.Fatalf("first line %v", first)
			}
			last := appendTicks(t, env.Store, 0, 3)
			r.waitLines(t, 4)
			d.drop() // the command reconnects and resumes
			last = appendTicks(t, env.Store, 3, 3)
			lines := r.waitLines(t, 7)
			if code := r.stop(t); code != cli.ExitOK {
				t.Fatalf("exit %d after interrupt: %s", code, r.err.String())
			}
			if len(lines) != 7 {
				t.Fatalf("lines:\n%s", strings.Join(lines, "\n"))
			}
			for i, l := range lines[1:] {
				ev := decode(t, l)
				want := last - 5 + int64(i)
				if ev["seq"] != float64(want) || ev["type"] != "test.tick" || ev["subscription"] != first["subscription"] ||
					ev["entity_key"] != fmt.Sprintf("WEB-%d", i) || ev["payload"].(map[string]any)["n"] != float64(i) ||
					ev["actor"].(map[string]any)["kind"] != "human" {
					t.Fatalf("line %d: %s (want seq %d)", i+1, l, want)
				}
			}
			if !strings.Contains(r.err.String(), "reconnected") {
				t.Fatalf("stderr %q: want a note of the reconnect", r.err.String())
			}
		})
	}
}

func TestSubscribeFromSeq(t *testing.T) {
	env := startEnv(t, false)
	last := appendTicks(t, env.Store, 0, 5)
	r := start(t, nil, "--url", env.URL, "--token", env.Token(t, "bob"), "subscribe", "--from-seq", fmt.Sprint(last-2), "project:WEB")
	lines := r.waitLines(t, 3)
	for i, l := range lines[1:] {
		if ev := decode(t, l); ev["seq"] != float64(last-1+int64(i)) {
			t.Fatalf("line %d: %s", i+1, l)
		}
	}
	r.stop(t)
}

func TestSubscribeErrors(t *testing.T) {
	env := startEnv(t, false)
	r := runCmd(t, nil, "--url", env.URL, "--token", env.Token(t, "carol"), "subscribe", "project:WEB")
	if r.code != exitRPC || !strings.Contains(r.stderr, "error -32003") {
		t.Fatalf("not a member: exit %d, stderr %q", r.code, r.stderr)
	}
	// Access revoked while subscribed: the subscription ends, status 1.
	run := start(t, nil, "--url", env.URL, "--token", env.Token(t, "bob"), "subscribe", "project:WEB")
	run.waitLines(t, 1)
	if err := env.Store.Revoke(context.Background(), "WEB", "bob", "human", "alice"); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-run.done:
		run.done <- code
		if code != exitRPC || !strings.Contains(run.err.String(), "forbidden") {
			t.Fatalf("exit %d, stderr %q", code, run.err.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not end")
	}
}
