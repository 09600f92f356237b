package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/gateway/internal/wsnet"
	"github.com/ballet/gateway/planner/provider"
)

// A POST /rpc subscriber that stops reading is a WebSocket's: it costs its position, not copies
// of events, and once it reads again it gets what it can, then stream.closed lagging (it fell
// more than BALLET_CATCH_UP_LIMIT behind) and the response's end.
func TestPostStalledSubscriberLags(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{RecentBytes: 1 << 20, CatchUpLimit: 100,
		WebSockets: &wsnet.Options{FlushStall: 5 * time.Minute}})
	env.Project(t, "WEB", "alice", "viewer")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			_ = c.(*net.TCPConn).SetReadBuffer(16 << 10)
		}
		return c, err
	}}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, env.BaseURL+"/rpc", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"stream.subscribe","params":{"subscription":"x","stream":"project:WEB"}}`))
	req.Header.Set("Authorization", "Bearer "+env.Token(t, "alice"))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	p := &post{t: t, resp: resp, r: bufio.NewReader(resp.Body), cancel: func() {}}
	t.Cleanup(p.close)
	if l := p.mustNext(); l.Error != nil {
		t.Fatalf("answer %+v", l)
	}
	pad := strings.Repeat("p", 32<<10)
	for i := range 200 {
		ev := itemEvent("WEB", "WEB-1", "item.updated", i)
		ev.Payload = []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, pad))
		appendN(t, env, ev)
	}
	if v, _ := labeledMetric(t, env.Server, "ballet_gateway_connections", "transport", "http"); v != 1 {
		t.Fatalf("while stalled: %v HTTP connections, want 1", v)
	}
	var last int64
	for {
		l := p.mustNext()
		if l.Method == "stream.closed" {
			if !strings.Contains(string(l.Params), `"lagging"`) {
				t.Fatalf("closed %s", l.Params)
			}
			break
		}
		var ev struct{ Seq int64 }
		_ = json.Unmarshal(l.Params, &ev)
		if l.Method != "stream.event" || ev.Seq <= last {
			t.Fatalf("after %d: %+v", last, l)
		}
		last = ev.Seq
	}
	p.mustEnd()
	waitSessions(t, env.Server, 0)
}

// A planner turn over HTTP: planner.send is one line; planner.watch streams the turn's output,
// every piece once and in order, the same as a WebSocket watcher's.
func TestPostPlannerTurn(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(plannerScript))
	if err != nil {
		t.Fatal(err)
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{Planner: provider.NewScripted(script)})
	env.Project(t, "WEB", "alice", "member")
	session := createSession(t, env, env.Token(t, "alice"))
	ws := login(t, env, codec.JSON, "alice")
	ws.mustCall("planner.watch", map[string]any{"subscription": "p", "session": session}, nil)
	watch := postRPC(t, env, env.Token(t, "alice"), `{"jsonrpc":"2.0","id":1,"method":"planner.watch","params":{"subscription":"p","session":"`+session+`"}}`, nil)
	if l := watch.mustNext(); !l.hasID || l.Error != nil {
		t.Fatalf("watch answer %+v", l)
	}
	send := postRPC(t, env, env.Token(t, "alice"), `{"jsonrpc":"2.0","id":2,"method":"planner.send","params":{"session":"`+session+`","text":"plan the release"}}`, nil)
	if l := send.mustNext(); l.Error != nil || !strings.Contains(string(l.Result), `"seq":1`) {
		t.Fatalf("send answer %+v %s", l, l.Result)
	}
	send.mustEnd()
	var overHTTP []output
	for len(overHTTP) == 0 || overHTTP[len(overHTTP)-1].Type != "done" {
		l := watch.mustNext()
		if l.Method != "planner.output" {
			continue
		}
		var o output
		if err := json.Unmarshal(l.Params, &o); err != nil {
			t.Fatal(err)
		}
		overHTTP = append(overHTTP, o)
	}
	overWS := ws.outputs("p")
	a, _ := json.Marshal(overHTTP)
	b, _ := json.Marshal(overWS)
	if string(a) != string(b) {
		t.Fatalf("over HTTP:\n%s\nover the WebSocket:\n%s", a, b)
	}
}

// A promised body that never comes is answered 400 once the body's grace has passed, and the
// socket closed: it holds nothing for longer.
func TestPostBodyThatNeverComes(t *testing.T) {
	env := startHTTPGateway(t, gateway.Config{})
	c, err := net.Dial("tcp", strings.TrimPrefix(env.BaseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+env.Token(t, "alice")+
		"\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":")
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the socket stays open")
	}
}

// FuzzPostBody: whatever the body, POST /rpc answers a problem or one JSON-RPC object a line,
// never a crash or a hang. (A body that is a valid request opens a session, which the
// recorder cannot hold: 501.)
func FuzzPostBody(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"system.ping"}`, `[{"jsonrpc":"2.0","id":1,"method":"a"}]`, `[]`, `{`, ``, `null`,
		`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":"x"}}`, `{"jsonrpc":"2.0","method":"$/heartbeat"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":"x","method":"a"}`, "\xff\xfe",
	} {
		f.Add(s)
	}
	env := gatewaytest.Start(f, nil)
	h, tok := env.Server.Handler(), env.Token(f, "alice")
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "/rpc", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK:
			line := w.Body.Bytes()
			var m map[string]json.RawMessage
			if bytes.Count(line, []byte("\n")) != 1 || json.Unmarshal(line, &m) != nil || m["error"] == nil {
				t.Fatalf("body %q answered %q", body, line)
			}
		case http.StatusNotImplemented, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("body %q answered %d %q", body, w.Code, w.Body.String())
		}
	})
}
