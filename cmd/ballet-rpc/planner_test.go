package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/cli"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// fakePlanner answers auth and the planner methods as the spec says and
// plays a scripted turn after planner.send.
type fakePlanner struct {
	srv    *httptest.Server
	finish string // the done reason of the turn

	mu        sync.Mutex
	conns     []*websocket.Conn
	rpcs      []*rpc.Conn
	watch     string    // subscription id of the last planner.watch
	watchConn *rpc.Conn // and its connection
	log       []string
}

type fakeTransport struct {
	ws  *websocket.Conn
	typ websocket.MessageType
}

func (f *fakeTransport) Read(ctx context.Context) ([]byte, error) {
	_, b, err := f.ws.Read(ctx)
	return b, err
}

func (f *fakeTransport) Write(ctx context.Context, b []byte) error { return f.ws.Write(ctx, f.typ, b) }

func startFakePlanner(t testing.TB, finish string) *fakePlanner {
	f := &fakePlanner{finish: finish}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{codec.NameMsgPack, codec.NameJSON}})
		if err != nil {
			return
		}
		c := codec.ByName(ws.Subprotocol())
		typ := websocket.MessageText
		if c.Binary() {
			typ = websocket.MessageBinary
		}
		conn := rpc.NewConn(&fakeTransport{ws: ws, typ: typ}, c, &rpc.Options{Handler: rpc.HandlerFunc(f.handle)})
		f.mu.Lock()
		f.conns = append(f.conns, ws)
		f.rpcs = append(f.rpcs, conn)
		f.mu.Unlock()
		conn.Start(context.Background())
	}))
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, ws := range f.conns {
			_ = ws.CloseNow()
			f.rpcs[i].Close()
		}
		f.srv.Close()
	})
	return f
}

func (f *fakePlanner) url() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/rpc" }

func (f *fakePlanner) handle(ctx context.Context, req *rpc.Request) (any, error) {
	var p map[string]any
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.log = append(f.log, req.Method)
	f.mu.Unlock()
	switch req.Method {
	case "auth":
		return map[string]any{"subject": "alice", "expires_at": time.Now().Add(time.Hour).Unix()}, nil
	case "$/heartbeat":
		return nil, nil
	case "planner.watch":
		f.mu.Lock()
		f.watch, _ = p["subscription"].(string)
		f.watchConn = req.Conn
		f.mu.Unlock()
		return map[string]any{"subscription": p["subscription"], "running": false}, nil
	case "stream.unsubscribe":
		return map[string]any{}, nil
	case "planner.send":
		if p["text"] == "busy" {
			return nil, rpc.Errorf(protocol.ErrConflict, "the planner is still answering")
		}
		f.mu.Lock()
		sub, session, watcher := f.watch, p["session"], f.watchConn
		f.mu.Unlock()
		req.AfterReply(func() {
			out := func(m map[string]any) {
				m["subscription"], m["session"] = sub, session
				_ = watcher.Notify(context.Background(), "planner.output", m)
			}
			out(map[string]any{"type": "message", "seq": 3})
			out(map[string]any{"type": "text", "text": "Hello"})
			out(map[string]any{"type": "tool_call", "tool": "list_items", "tool_use_id": "t1", "input": map[string]any{"project": "WEB"}})
			if f.finish == "error" {
				out(map[string]any{"type": "error", "text": "provider unavailable"})
			}
			out(map[string]any{"type": "done", "text": f.finish})
			// Output after done is not the command's business.
			out(map[string]any{"type": "text", "text": "late"})
		})
		return map[string]any{"seq": 3}, nil
	}
	return nil, rpc.Errorf(rpc.ErrMethodNotFound, "method %s not found", req.Method)
}

func TestSend(t *testing.T) {
	for _, codecFlag := range []string{"--json", "--msgpack"} {
		t.Run(codecFlag, func(t *testing.T) {
			f := startFakePlanner(t, "end_turn")
			r := runCmd(t, nil, "--url", f.url(), "--token", "t", codecFlag, "send", "sess-1", "hello planner")
			if r.code != cli.ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			want := []string{
				`{"seq":3}`,
				`{"subscription":"s1","session":"sess-1","type":"message","seq":3}`,
				`{"subscription":"s1","session":"sess-1","type":"text","text":"Hello"}`,
				`{"subscription":"s1","session":"sess-1","type":"tool_call","tool":"list_items","tool_use_id":"t1","input":{"project":"WEB"}}`,
				`{"subscription":"s1","session":"sess-1","type":"done","text":"end_turn"}`,
			}
			if strings.Join(lines, "\n") != strings.Join(want, "\n") {
				t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, strings.Join(want, "\n"))
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if got := strings.Join(f.log, " "); !strings.HasPrefix(got, "auth planner.watch planner.send") {
				t.Fatalf("requests %s: want the watch before the send", got)
			}
		})
	}
}

func TestSendFailures(t *testing.T) {
	f := startFakePlanner(t, "error")
	r := runCmd(t, nil, "--url", f.url(), "--token", "t", "send", "sess-1", "hello")
	if r.code != exitRPC || !strings.Contains(r.stdout, `"type":"error"`) || !strings.Contains(r.stderr, "turn failed") {
		t.Fatalf("failed turn: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	r = runCmd(t, nil, "--url", f.url(), "--token", "t", "send", "sess-1", "busy")
	if r.code != exitRPC || !strings.Contains(r.stderr, "error -32009") {
		t.Fatalf("conflict: exit %d, stderr %s", r.code, r.stderr)
	}
}

func TestWatch(t *testing.T) {
	f := startFakePlanner(t, "end_turn")
	r := start(t, nil, "--url", f.url(), "--token", "t", "--json", "watch", "sess-1")
	if first := decode(t, r.waitLines(t, 1)[0]); first["subscription"] != "s1" || first["running"] != false {
		t.Fatalf("first line %v", first)
	}
	// Another client starts a turn; the watch prints it all, done included,
	// and goes on.
	if res := runCmd(t, nil, "--url", f.url(), "--token", "t", "call", "planner.send", `{"session":"sess-1","text":"hi"}`); res.code != cli.ExitOK {
		t.Fatalf("send: %d %s", res.code, res.stderr)
	}
	lines := r.waitLines(t, 6)
	if decode(t, lines[4])["type"] != "done" || decode(t, lines[5])["text"] != "late" {
		t.Fatalf("lines:\n%s", strings.Join(lines, "\n"))
	}
	if code := r.stop(t); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, r.err.String())
	}
}
