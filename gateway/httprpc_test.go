package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// line is one JSON-RPC object of a streamed POST /rpc response.
type line struct {
	ID     *int64          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	hasID bool
}

// post is one POST /rpc and its streamed response, read line by line (or event by event).
type post struct {
	t      testing.TB
	resp   *http.Response
	r      *bufio.Reader
	sse    bool
	cancel context.CancelFunc
}

// postRPC sends body with token (none when empty) and returns the response, whatever its status.
func postRPC(t testing.TB, env *gatewaytest.Env, token, body string, header http.Header) *post {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.BaseURL+"/rpc", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p := &post{t: t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel,
		sse: resp.Header.Get("Content-Type") == "text/event-stream"}
	t.Cleanup(p.close)
	return p
}

func (p *post) close() {
	p.cancel()
	_ = p.resp.Body.Close()
}

// next reads the next object, failing the test on anything but one; io.EOF at the body's end.
func (p *post) next(timeout time.Duration) (*line, error) {
	p.t.Helper()
	type read struct {
		b   []byte
		err error
	}
	ch := make(chan read, 1)
	go func() {
		b, err := p.r.ReadBytes('\n')
		if p.sse && err == nil {
			var blank []byte
			if blank, err = p.r.ReadBytes('\n'); err == nil && len(blank) != 1 {
				err = errors.New("an event of more than one data line: " + string(blank))
			}
			if !bytes.HasPrefix(b, []byte("data: ")) {
				err = errors.New("not a data line: " + string(b))
			}
			b = bytes.TrimPrefix(b, []byte("data: "))
		}
		ch <- read{b, err}
	}()
	var rd read
	select {
	case rd = <-ch:
	case <-time.After(timeout):
		p.close()
		<-ch
		return nil, errors.New("no line in time")
	}
	if rd.err != nil {
		if rd.err == io.EOF && len(rd.b) == 0 {
			return nil, io.EOF
		}
		return nil, rd.err
	}
	var l line
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(rd.b, &keys); err != nil {
		p.t.Fatalf("a line that is not a JSON object: %q", rd.b)
	}
	_, l.hasID = keys["id"]
	if err := json.Unmarshal(rd.b, &l); err != nil {
		p.t.Fatalf("line %q: %v", rd.b, err)
	}
	return &l, nil
}

func (p *post) mustNext() *line {
	p.t.Helper()
	l, err := p.next(10 * time.Second)
	if err != nil {
		p.t.Fatalf("next line: %v", err)
	}
	return l
}

// mustEnd checks that the body ends cleanly (its last chunk read) next.
func (p *post) mustEnd() {
	p.t.Helper()
	if l, err := p.next(10 * time.Second); err != io.EOF {
		if l != nil && l.Error != nil {
			p.t.Fatalf("want the body's end, got the error %d %q %s", l.Error.Code, l.Error.Message, l.Error.Data)
		}
		p.t.Fatalf("want the body's end, got %+v, %v", l, err)
	}
}

func startHTTPGateway(t *testing.T, cfg gateway.Config) *gatewaytest.Env {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: cfg})
	env.Project(t, "WEB", "alice", "member", "bob", "viewer")
	return env
}

func TestPostOneShot(t *testing.T) {
	env := startHTTPGateway(t, gateway.Config{})
	tok := env.Token(t, "alice")
	for _, accept := range []string{"", "text/event-stream"} {
		p := postRPC(t, env, tok, `{"jsonrpc":"2.0","id":7,"method":"system.ping"}`, http.Header{"Accept": {accept}})
		want := "application/x-ndjson"
		if accept != "" {
			want = accept
		}
		if p.resp.StatusCode != 200 || p.resp.Header.Get("Content-Type") != want ||
			p.resp.Header.Get("Cache-Control") != "no-store" || p.resp.Header.Get("X-Accel-Buffering") != "no" ||
			p.resp.Header.Get("Ballet-Heartbeat-Ms") == "" {
			t.Fatalf("status %d, headers %v", p.resp.StatusCode, p.resp.Header)
		}
		l := p.mustNext()
		var res struct{ Subject string }
		if l.ID == nil || *l.ID != 7 || json.Unmarshal(l.Result, &res) != nil || res.Subject != "alice" {
			t.Fatalf("answer %+v (%s)", l, l.Result)
		}
		p.mustEnd()
	}
	// A notification gets an empty body; its reader may read it before the session has
	// started (served as authenticated all the same), so a few are sent.
	for range 30 {
		p := postRPC(t, env, tok, `{"jsonrpc":"2.0","method":"system.ping"}`, nil)
		p.mustEnd()
	}
	waitSessions(t, env.Server, 0)
}

func TestPostRefusedBeforeTheBody(t *testing.T) {
	env := startHTTPGateway(t, gateway.Config{ReadLimit: 64 << 10})
	tok := env.Token(t, "alice")
	expired := authtest.Mint(t, env.Issuer, "alice", auth.TokenOptions{Audience: []string{gatewaytest.Audience},
		IssuedAt: time.Now().Add(-2 * time.Hour)})
	ping := `{"jsonrpc":"2.0","id":1,"method":"system.ping"}`
	for _, c := range []struct {
		name, token, body, ctype string
		status                   int
	}{
		{"no token", "", ping, "application/json", 401},
		{"a bad token", "not-a-token", ping, "application/json", 401},
		{"an expired token", expired, ping, "application/json", 401},
		{"not JSON", tok, ping, "multipart/form-data; boundary=x", 415},
		{"too long", tok, `{"jsonrpc":"2.0","id":1,"method":"system.ping","params":{"x":"` + strings.Repeat("a", 70<<10) + `"}}`,
			"application/json", 413},
	} {
		p := postRPC(t, env, c.token, c.body, http.Header{"Content-Type": {c.ctype}})
		body, _ := io.ReadAll(p.resp.Body)
		var prob struct {
			Status int
			Detail string
		}
		if p.resp.StatusCode != c.status || p.resp.Header.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(body, &prob) != nil || prob.Status != c.status || prob.Detail == "" {
			t.Errorf("%s: %d %s %s", c.name, p.resp.StatusCode, p.resp.Header.Get("Content-Type"), body)
		}
		if c.status == 401 && !strings.HasPrefix(p.resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q", c.name, p.resp.Header.Get("WWW-Authenticate"))
		}
	}
}

func TestPostInvalidRequests(t *testing.T) {
	env := startHTTPGateway(t, gateway.Config{})
	tok := env.Token(t, "alice")
	for _, c := range []struct {
		body string
		code int
		id   bool
		msg  string
	}{
		{`{"jsonrpc":"2.0","id":1,`, -32700, false, ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"system.ping"}]`, -32600, false, "batch requests are not supported"},
		{`{"jsonrpc":"2.0","id":2,"method":"auth","params":{"token":"x"}}`, -32600, true, "auth is not available over HTTP"},
		{`{"jsonrpc":"2.0","id":3,"method":"auth.refresh","params":{"token":"x"}}`, -32600, true, "auth.refresh is not available over HTTP"},
		{`{"jsonrpc":"2.0","method":"$/heartbeat","params":{}}`, -32600, false, "$/heartbeat is not available over HTTP"},
		{`{"jsonrpc":"2.0","id":4,"method":"no.such"}`, -32601, true, ""},
		{`{"jsonrpc":"2.0","id":5,"method":"stream.subscribe","params":{"subscription":"s1","stream":"nope"}}`, -32602, true, ""},
		{`{"jsonrpc":"2.0","id":6,"method":"stream.unsubscribe","params":{"subscription":"s1"}}`, -32004, true, ""},
	} {
		p := postRPC(t, env, tok, c.body, nil)
		l := p.mustNext()
		if p.resp.StatusCode != 200 || l.Error == nil || l.Error.Code != c.code || !l.hasID || (l.ID != nil) != c.id ||
			!strings.Contains(l.Error.Message, c.msg) {
			t.Errorf("%s: %d %+v", c.body, p.resp.StatusCode, l)
		}
		p.mustEnd()
	}
	waitSessions(t, env.Server, 0)
}

// waitSessions waits until srv has n sessions open.
func waitSessions(t testing.TB, srv *gateway.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Sessions() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions open, want %d", srv.Sessions(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPostSubscribeStreams(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{HeartbeatInterval: 300 * time.Millisecond}})
	env.Project(t, "WEB", "alice", "member")
	first := appendN(t, env, itemEvent("WEB", "WEB-1", "item.created", 1), itemEvent("WEB", "WEB-2", "item.created", 2))
	for _, accept := range []string{"", "text/event-stream"} {
		t.Run("accept="+accept, func(t *testing.T) {
			p := postRPC(t, env, env.Token(t, "alice"), `{"jsonrpc":"2.0","id":3,"method":"stream.subscribe","params":{"subscription":"s1","stream":"project:WEB","from_seq":`+
				itoa(first-2)+`}}`, http.Header{"Accept": {accept}})
			// The interval the heartbeats come at, which no auth result tells over HTTP.
			if got := p.resp.Header.Get("Ballet-Heartbeat-Ms"); got != "300" {
				t.Fatalf("Ballet-Heartbeat-Ms: %q, want 300", got)
			}
			var seqs []int64
			var answered bool
			for len(seqs) < 2 || !answered {
				l := p.mustNext()
				switch {
				case l.hasID:
					if l.Error != nil || *l.ID != 3 {
						t.Fatalf("answer %+v", l)
					}
					answered = true
				case l.Method == "stream.event":
					var ev struct{ Seq int64 }
					_ = json.Unmarshal(l.Params, &ev)
					seqs = append(seqs, ev.Seq)
				}
			}
			live := appendN(t, env, itemEvent("WEB", "WEB-3", "item.created", 3))
			var beats int
			for {
				l := p.mustNext()
				if l.hasID {
					t.Fatalf("a second object with an id: %+v", l)
				}
				if l.Method == "$/heartbeat" {
					beats++
					continue
				}
				var ev struct{ Seq int64 }
				_ = json.Unmarshal(l.Params, &ev)
				if l.Method != "stream.event" || ev.Seq != live {
					t.Fatalf("want event %d, got %+v", live, l)
				}
				break
			}
			// Heartbeats keep coming while nothing happens (the client never sends any).
			for beats < 3 {
				if l := p.mustNext(); l.Method == "$/heartbeat" {
					beats++
				}
			}
			if seqs[0] != first-1 || seqs[1] != first {
				t.Fatalf("replayed %v, want %d, %d", seqs, first-1, first)
			}
			if v, _ := labeledMetric(t, env.Server, "ballet_gateway_connections", "transport", "http"); v != 1 {
				t.Errorf("connections{transport=http} = %v", v)
			}
			if conns, _ := env.Server.Connections("alice", 10); len(conns) != 1 || conns[0].Transport != "http" ||
				conns[0].Codec != "json" || conns[0].Subscriptions != 1 {
				t.Errorf("the operators' listing: %+v", conns)
			}
			// Closing the request ends the subscription and the session.
			p.close()
			waitSessions(t, env.Server, 0)
		})
	}
}

func TestPostStreamEnds(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{MaxConnectionsPerSubject: 2}})
	env.Project(t, "WEB", "alice", "member", "bob", "viewer")
	sub := `{"jsonrpc":"2.0","id":1,"method":"stream.subscribe","params":{"subscription":"s1","stream":"project:WEB"}}`
	answered := func(p *post) {
		t.Helper()
		if l := p.mustNext(); !l.hasID || l.Error != nil {
			t.Fatalf("answer %+v", l)
		}
	}
	// An expired token ends the response with -32001 and the close code 4001.
	short := authtest.Mint(t, env.Issuer, "alice", auth.TokenOptions{Audience: []string{gatewaytest.Audience}, TTL: 2 * time.Second})
	p := postRPC(t, env, short, sub, nil)
	answered(p)
	wantEnd(t, p, -32001, 4001)

	// A subscription refused is the response's last line.
	p = postRPC(t, env, env.Token(t, "carol"), `{"jsonrpc":"2.0","id":2,"method":"stream.subscribe","params":{"subscription":"s1","stream":"project:WEB"}}`, nil)
	if l := p.mustNext(); l.Error == nil || l.Error.Code != -32003 {
		t.Fatalf("answer %+v", l)
	}
	p.mustEnd()

	// Each open response is a connection of its subject.
	tok := env.Token(t, "bob")
	a, b := postRPC(t, env, tok, sub, nil), postRPC(t, env, tok, sub, nil)
	answered(a)
	answered(b)
	c := postRPC(t, env, tok, sub, nil)
	if l := c.mustNext(); l.Error == nil || l.Error.Code != -32029 || !strings.Contains(string(l.Error.Data), "connections_per_subject") {
		t.Fatalf("third response %+v", l)
	}
	c.mustEnd()

	// Losing access closes the subscription: stream.closed forbidden, then the end.
	if err := env.Store.Revoke(context.Background(), "WEB", "bob", "system", "test"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*post{a, b} {
		for {
			l := p.mustNext()
			if l.Method == "stream.closed" {
				if !strings.Contains(string(l.Params), `"forbidden"`) {
					t.Fatalf("closed %s", l.Params)
				}
				break
			}
		}
		p.mustEnd()
	}

	// Shutdown ends an open response with -32000 and the close code 1001.
	d := postRPC(t, env, env.Token(t, "alice"), sub, nil)
	answered(d)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := env.Server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wantEnd(t, d, gateway.ErrServerEnded, 1001)
}

// wantEnd reads p up to an error object without id of code and close, then the body's end.
func wantEnd(t *testing.T, p *post, code, close int) {
	t.Helper()
	for {
		l := p.mustNext()
		if l.Method != "" {
			continue
		}
		var d struct{ Close int }
		if l.hasID || l.Error == nil || l.Error.Code != code || json.Unmarshal(l.Error.Data, &d) != nil || d.Close != close {
			t.Fatalf("want an end of %d (close %d), got %+v", code, close, l)
		}
		break
	}
	p.mustEnd()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Each POST spends its address's budget as an upgrade does: beyond it, 429 with Retry-After.
func TestPostSpendsTheAddressBudget(t *testing.T) {
	env := startHTTPGateway(t, gateway.Config{AddrRate: 1})
	tok := env.Token(t, "alice")
	var statuses []int
	for range 4 {
		p := postRPC(t, env, tok, `{"jsonrpc":"2.0","id":1,"method":"system.ping"}`, nil)
		statuses = append(statuses, p.resp.StatusCode)
		if p.resp.StatusCode == http.StatusTooManyRequests && (p.resp.Header.Get("Retry-After") == "" ||
			p.resp.Header.Get("Content-Type") != "application/problem+json") {
			t.Errorf("429 without Retry-After or a problem: %v", p.resp.Header)
		}
		p.close()
	}
	if statuses[0] != 200 || statuses[3] != http.StatusTooManyRequests {
		t.Fatalf("statuses %v: want the burst served, then 429", statuses)
	}
}

// POST /rpc follows the handshake's Origin rule: a page of an origin BALLET_ALLOWED_ORIGINS
// lets in may call it (CORS, preflight included); another is refused 403.
func TestPostOrigins(t *testing.T) {
	env := startHTTPGateway(t, gateway.Config{AllowedOrigins: []string{"app.example.com"}})
	ping := `{"jsonrpc":"2.0","id":1,"method":"system.ping"}`
	p := postRPC(t, env, env.Token(t, "alice"), ping, http.Header{"Origin": {"https://app.example.com"}})
	if p.resp.StatusCode != 200 || p.resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		p.resp.Header.Get("Access-Control-Expose-Headers") != "Ballet-Heartbeat-Ms" {
		t.Fatalf("allowed origin: %d %v", p.resp.StatusCode, p.resp.Header)
	}
	p.mustNext()
	p = postRPC(t, env, env.Token(t, "alice"), ping, http.Header{"Origin": {"https://evil.example"}})
	if p.resp.StatusCode != http.StatusForbidden || p.resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("foreign origin: %d %v", p.resp.StatusCode, p.resp.Header)
	}
	for origin, status := range map[string]int{"https://app.example.com": 204, "https://evil.example": 403} {
		req, _ := http.NewRequest(http.MethodOptions, env.BaseURL+"/rpc", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status || (status == 204 && (resp.Header.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization"))) {
			t.Errorf("preflight from %s: %d %v", origin, resp.StatusCode, resp.Header)
		}
	}
}
