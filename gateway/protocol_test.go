package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

func TestSubprotocolNegotiation(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	for _, tc := range []struct {
		offer []string
		want  string
	}{
		{[]string{codec.NameJSON, codec.NameMsgPack}, codec.NameMsgPack},
		{[]string{codec.NameMsgPack, codec.NameJSON}, codec.NameMsgPack},
		{[]string{"other", codec.NameJSON}, codec.NameJSON},
	} {
		ws, err := dialRaw(t, env.URL, tc.offer, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ws.Subprotocol() != tc.want {
			t.Errorf("offer %v: got %q want %q", tc.offer, ws.Subprotocol(), tc.want)
		}
		ws.Close(websocket.StatusNormalClosure, "")
	}
}

func TestNoSubprotocolCloses1008(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	for _, offer := range [][]string{nil, {"ballet.v2.json"}} {
		ws, err := dialRaw(t, env.URL, offer, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ws.Subprotocol() != "" {
			t.Fatalf("server echoed subprotocol %q", ws.Subprotocol())
		}
		_, _, err = ws.Read(context.Background())
		if code := websocket.CloseStatus(err); code != websocket.StatusPolicyViolation {
			t.Fatalf("offer %v: close %v (%v), want 1008", offer, code, err)
		}
	}
}

func TestOriginCheck(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{AllowedOrigins: []string{"app.example.com"}}})
	h := http.Header{"Origin": {"https://evil.example.net"}}
	if _, err := dialRaw(t, env.URL, []string{codec.NameJSON}, h); err == nil {
		t.Fatal("foreign origin accepted")
	}
	h.Set("Origin", "https://app.example.com")
	if _, err := dialRaw(t, env.URL, []string{codec.NameJSON}, h); err != nil {
		t.Fatalf("allowed origin refused: %v", err)
	}
	// Non-browser clients send no Origin.
	if _, err := dialRaw(t, env.URL, []string{codec.NameJSON}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestAuthAndPing(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := dial(t, env.URL, c)
		var res authResult
		before := time.Now()
		k.mustCall("auth", map[string]string{"token": env.Token(t, "alice")}, &res)
		if res.Subject != "alice" || res.ExpiresAt < before.Add(50*time.Minute).Unix() {
			t.Fatalf("auth result %+v", res)
		}
		var ping struct {
			Time    int64  `json:"time"`
			Subject string `json:"subject"`
		}
		k.mustCall("system.ping", map[string]any{}, &ping)
		if ping.Subject != "alice" || ping.Time < before.UnixMilli() || ping.Time > time.Now().UnixMilli() {
			t.Fatalf("ping %+v", ping)
		}
		// Ping without params works too.
		k.mustCall("system.ping", nil, &ping)
		// A second auth is refused without closing.
		k.wantError("auth", map[string]string{"token": env.Token(t, "alice")}, -32600)
		k.mustCall("system.ping", nil, nil)
	})
}

func TestAuthFailuresClose4001(t *testing.T) {
	// A token of another issuer's key waits for the key set's next fetch before it is refused:
	// within a short interval, not the default 10 s, most of the 10 s the test gives it.
	env := gatewaytest.Start(t, &gatewaytest.Options{KeyRefreshInterval: 100 * time.Millisecond})
	other := authtest.NewIssuer(t)
	aud := []string{gatewaytest.Audience}
	tokens := map[string]string{
		"bad signature":  authtest.Mint(t, other, "alice", auth.TokenOptions{Audience: aud}),
		"wrong audience": authtest.Mint(t, env.Issuer, "alice", auth.TokenOptions{Audience: []string{"someone-else"}}),
		"expired": authtest.Mint(t, env.Issuer, "alice", auth.TokenOptions{Audience: aud,
			IssuedAt: time.Now().Add(-2 * time.Hour), TTL: time.Hour}),
		"garbage": "not.a.token",
	}
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		for name, tok := range tokens {
			t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
				k := dial(t, env.URL, c)
				id := k.send("auth", map[string]string{"token": tok})
				m, err := k.next(5 * time.Second)
				if err == nil {
					if !m.IsResponse() || m.ID != id || m.Error == nil || m.Error.Code != -32001 {
						t.Fatalf("got %+v", m)
					}
				}
				if code := k.waitClose(5 * time.Second); code != gateway.StatusUnauthenticated {
					t.Fatalf("close %d, want 4001", code)
				}
			})
		}
		t.Run("first message not auth", func(t *testing.T) {
			k := dial(t, env.URL, c)
			k.send("system.ping", nil)
			if code := k.waitClose(5 * time.Second); code != gateway.StatusUnauthenticated {
				t.Fatalf("close %d", code)
			}
		})
		t.Run("first message a notification", func(t *testing.T) {
			k := dial(t, env.URL, c)
			k.notify("$/heartbeat", map[string]int64{"time": 1})
			if code := k.waitClose(5 * time.Second); code != gateway.StatusUnauthenticated {
				t.Fatalf("close %d", code)
			}
		})
		t.Run("missing token", func(t *testing.T) {
			k := dial(t, env.URL, c)
			k.send("auth", map[string]string{})
			if code := k.waitClose(5 * time.Second); code != gateway.StatusUnauthenticated {
				t.Fatalf("close %d", code)
			}
		})
	})
}

func TestAuthTimeout(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{AuthTimeout: 300 * time.Millisecond}})
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		start := time.Now() // before the server takes the connection and starts its timer
		k := dial(t, env.URL, c)
		if code := k.waitClose(5 * time.Second); code != gateway.StatusUnauthenticated {
			t.Fatalf("close %d", code)
		}
		if el := time.Since(start); el < 250*time.Millisecond {
			t.Fatalf("closed after %v, before the auth timeout", el)
		}
	})
}

func TestMessagesDuringAuthWaitForIt(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := dial(t, env.URL, c)
		// Sent back to back: ping arrives before auth's result and must be
		// processed after it, authenticated.
		authID := k.send("auth", map[string]string{"token": env.Token(t, "alice")})
		pingID := k.send("system.ping", nil)
		first, second := k.mustNext(), k.mustNext()
		if first.ID != authID || first.Error != nil {
			t.Fatalf("first reply %+v", first)
		}
		if second.ID != pingID || second.Error != nil {
			t.Fatalf("second reply %+v %+v", second, second.Error)
		}
	})
}

func TestTokenExpiryWhileConnected(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := dial(t, env.URL, c)
		// Expiry has second resolution: the token lives 3 to 4 s, time for its auth on a
		// loaded machine.
		tok := authtest.Mint(t, env.Issuer, "alice", auth.TokenOptions{Audience: []string{gatewaytest.Audience}, TTL: 4 * time.Second})
		var res authResult
		k.mustCall("auth", map[string]string{"token": tok}, &res)
		if code := k.waitClose(6 * time.Second); code != gateway.StatusUnauthenticated {
			t.Fatalf("close %d", code)
		}
	})
}

func TestRefresh(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	aud := []string{gatewaytest.Audience}
	// Tokens that live 3 to 4 s (expiry has second resolution): time for the calls made
	// before they expire, on a loaded machine too.
	const ttl = 4 * time.Second
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		// Each waits out a token's life: at once.
		together(t, subtest{"same subject extends", func(t *testing.T) {
			k := dial(t, env.URL, c)
			var first authResult
			k.mustCall("auth", map[string]string{"token": authtest.Mint(t, env.Issuer, "alice", auth.TokenOptions{Audience: aud, TTL: ttl})}, &first)
			var res authResult
			k.mustCall("auth.refresh", map[string]string{"token": authtest.Mint(t, env.Issuer, "alice", auth.TokenOptions{Audience: aud, TTL: time.Hour})}, &res)
			if res.Subject != "alice" || res.ExpiresAt < time.Now().Add(50*time.Minute).Unix() {
				t.Fatalf("refresh result %+v", res)
			}
			time.Sleep(time.Until(time.Unix(first.ExpiresAt, 0)) + time.Second)
			k.mustCall("system.ping", nil, nil) // still open past the first token's expiry
		}}, subtest{"other subject refused, old token stays until it expires", func(t *testing.T) {
			k := dial(t, env.URL, c)
			k.mustCall("auth", map[string]string{"token": authtest.Mint(t, env.Issuer, "alice", auth.TokenOptions{Audience: aud, TTL: ttl})}, nil)
			k.wantError("auth.refresh", map[string]string{"token": env.Token(t, "mallory")}, -32001)
			k.wantError("auth.refresh", map[string]string{"token": "garbage"}, -32001)
			var ping struct {
				Subject string `json:"subject"`
			}
			k.mustCall("system.ping", nil, &ping)
			if ping.Subject != "alice" {
				t.Fatalf("subject changed to %q", ping.Subject)
			}
			if code := k.waitClose(5 * time.Second); code != gateway.StatusUnauthenticated {
				t.Fatalf("close %d", code)
			}
		}})
	})
}

func TestHeartbeats(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{HeartbeatInterval: 200 * time.Millisecond}})
	// For the client's heartbeats: a longer interval, so that the test's own pauses on a
	// loaded machine do not add up to three of them.
	slow := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{HeartbeatInterval: time.Second}})
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		// Each waits on heartbeat intervals, on a connection of its own: at once.
		together(t, subtest{"server sends them", func(t *testing.T) {
			k := login(t, env, c, "alice")
			// The client talks meanwhile, so that a late heartbeat finds it alive.
			talk := time.NewTicker(50 * time.Millisecond)
			defer talk.Stop()
			deadline := time.After(30 * time.Second)
			for n := 0; n < 2; {
				select {
				case <-talk.C:
					k.notify("$/heartbeat", map[string]int64{"time": time.Now().UnixMilli()})
				case m := <-k.msgs:
					if m.Method == "$/heartbeat" {
						var hb struct {
							Time int64 `json:"time"`
						}
						if err := c.Unmarshal(m.Params, &hb); err != nil || hb.Time < time.Now().Add(-time.Minute).UnixMilli() {
							t.Fatalf("heartbeat params %v %+v", err, hb)
						}
						n++
					}
				case <-deadline:
					t.Fatal("no heartbeats from the server")
				}
			}
		}}, subtest{"client heartbeats keep it open", func(t *testing.T) {
			k := login(t, slow, c, "alice")
			for i := 0; i < 16; i++ { // 4 s, four intervals: more than the three of silence that close it
				time.Sleep(250 * time.Millisecond)
				k.notify("$/heartbeat", map[string]int64{"time": time.Now().UnixMilli()})
			}
			k.mustCall("system.ping", nil, nil)
		}}, subtest{"silence closes 4000", func(t *testing.T) {
			start := time.Now() // before the auth, which the silence is counted from
			k := login(t, env, c, "alice")
			if code := k.waitClose(5 * time.Second); code != gateway.StatusHeartbeatTimeout {
				t.Fatalf("close %d, want 4000", code)
			}
			if el := time.Since(start); el < 550*time.Millisecond {
				t.Fatalf("closed after %v, before three intervals", el)
			}
		}})
	})
}

func TestWrongFrameKindCloses1003(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	for _, c := range codecs {
		k := login(t, env, c, "alice")
		typ := websocket.MessageBinary
		if c.Binary() {
			typ = websocket.MessageText
		}
		_ = k.ws.Write(context.Background(), typ, []byte(`{"jsonrpc":"2.0","id":5,"method":"system.ping"}`))
		if code := k.waitClose(5 * time.Second); code != websocket.StatusUnsupportedData {
			t.Fatalf("%s: close %d, want 1003", c.Name(), code)
		}
	}
}

func TestOversizedFrameCloses1009(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{ReadLimit: 64 << 10}})
	for _, c := range codecs {
		k := login(t, env, c, "alice")
		// Within the limit works.
		k.mustCall("system.ping", map[string]string{"pad": strings.Repeat("x", 60<<10)}, nil)
		big := map[string]string{"pad": strings.Repeat("x", 70<<10)}
		raw, _ := c.Marshal(big)
		frame, _ := c.Encode(nil, &codec.Message{ID: 1, HasID: true, Method: "system.ping", Params: raw})
		typ := websocket.MessageText
		if c.Binary() {
			typ = websocket.MessageBinary
		}
		// The server may close before the whole frame is written.
		_ = k.ws.Write(context.Background(), typ, frame)
		if code := k.waitClose(5 * time.Second); code != websocket.StatusMessageTooBig {
			t.Fatalf("%s: close %d, want 1009", c.Name(), code)
		}
	}
}

func TestDefaultReadLimitIsOneMiB(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	k := login(t, env, codec.MsgPack, "alice")
	k.mustCall("system.ping", map[string]string{"pad": strings.Repeat("x", 900<<10)}, nil)
}

func TestNormalClosure1000(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	for _, c := range codecs {
		k := login(t, env, c, "alice")
		if err := k.ws.Close(websocket.StatusNormalClosure, "bye"); err != nil {
			t.Fatalf("%s: close handshake: %v", c.Name(), err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for env.Server.Sessions() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := env.Server.Sessions(); n != 0 {
		t.Fatalf("%d sessions left", n)
	}
}

func TestJSONRPCErrors(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	env.Project(t, "WEB", "alice", "viewer")
	k := login(t, env, codec.JSON, "alice")
	for _, tc := range []struct {
		frame string
		code  int
		id    any
	}{
		{`{"jsonrpc":"2.0","id":`, -32700, nil},
		{`[{"jsonrpc":"2.0","id":1,"method":"system.ping"}]`, -32600, nil},
		{`{"jsonrpc":"2.0","id":"x","method":"system.ping"}`, -32600, nil},
		{`{"jsonrpc":"2.0","id":2.5,"method":"system.ping"}`, -32600, nil},
		{`{"jsonrpc":"2.0","id":3,"method":"no.such"}`, -32601, int64(3)},
		{`{"jsonrpc":"2.0","id":4,"method":"stream.subscribe","params":{"subscription":5}}`, -32602, int64(4)},
		{`{"jsonrpc":"2.0","id":5,"method":"stream.subscribe","params":{"subscription":"s","stream":"bogus"}}`, -32602, int64(5)},
		{`{"jsonrpc":"2.0","id":6,"method":"stream.subscribe","params":{"subscription":"s","stream":"project:NOPE"}}`, -32004, int64(6)},
		{`{"jsonrpc":"2.0","id":7,"method":"stream.unsubscribe","params":{"subscription":"none"}}`, -32004, int64(7)},
	} {
		k.writeRaw([]byte(tc.frame))
		m := k.mustNext()
		if m.Error == nil || m.Error.Code != tc.code {
			t.Errorf("%s: got %+v %+v, want %d", tc.frame, m, m.Error, tc.code)
			continue
		}
		if tc.id == nil && m.HasID {
			t.Errorf("%s: id %d, want null", tc.frame, m.ID)
		}
		if id, ok := tc.id.(int64); ok && (!m.HasID || m.ID != id) {
			t.Errorf("%s: id %v/%d, want %d", tc.frame, m.HasID, m.ID, id)
		}
	}
	// The batch error says why.
	k.writeRaw([]byte(`[]`))
	if m := k.mustNext(); m.Error == nil || m.Error.Message != "batch requests are not supported" {
		t.Fatalf("batch: %+v", m.Error)
	}
	// Unknown notifications are ignored; the connection goes on.
	k.writeRaw([]byte(`{"jsonrpc":"2.0","method":"no.such","params":{}}`))
	k.mustCall("system.ping", nil, nil)
}

func TestConcurrentRequestsOnOneConnection(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := login(t, env, c, "alice")
		ids := map[int64]bool{}
		for i := 0; i < 200; i++ {
			ids[k.send("system.ping", nil)] = true
		}
		for len(ids) > 0 {
			m := k.mustNext()
			if !m.IsResponse() || m.Error != nil || !ids[m.ID] {
				t.Fatalf("unexpected %+v", m)
			}
			delete(ids, m.ID)
		}
	})
}

func TestHealthAndAdminEndpoints(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	resp, err := http.Get(env.BaseURL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", err, resp)
	}
	resp.Body.Close()
	k := login(t, env, codec.JSON, "alice")
	k.mustCall("system.ping", nil, nil)
	admin := env.Server.AdminHandler()
	get := func(path string) (int, string) {
		rec := &recorder{h: http.Header{}}
		req, _ := http.NewRequest("GET", path, nil)
		admin.ServeHTTP(rec, req)
		return rec.code, rec.body.String()
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	code, body := get("/metrics")
	for _, want := range []string{
		`ballet_gateway_connections{codec="json",transport="websocket"} 1`,
		`ballet_gateway_messages_received_total{method="system.ping"} 1`,
		`ballet_gateway_rpc_requests_total{code="0",method="auth"} 1`,
		`go_goroutines`, `process_resident_memory_bytes`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	env.Server.BeginDrain()
	if code, _ := get("/readyz"); code != 503 {
		t.Fatalf("readyz while draining %d", code)
	}
	resp, err = http.Get(env.BaseURL + "/rpc")
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("/rpc while draining: %v %v", err, resp)
	}
}

type recorder struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(c int) { r.code = c }

func TestShutdownCloses1001(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{DrainWindow: 500 * time.Millisecond}})
	var clients []*wsClient
	for i := 0; i < 6; i++ {
		clients = append(clients, login(t, env, codecs[i%2], "alice"))
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := env.Server.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	var first, last time.Duration
	for i, k := range clients {
		if code := k.waitClose(5 * time.Second); code != websocket.StatusGoingAway {
			t.Fatalf("client %d: close %d, want 1001", i, code)
		}
	}
	wg.Wait()
	_ = first
	last = time.Since(start)
	if last < 300*time.Millisecond {
		t.Fatalf("all closed within %v: not spread over the drain window", last)
	}
}

// Shutdown past its context ends the sessions that are still open at
// once, also one whose peer never answers the close handshake.
func TestShutdownGivesUpOnSilentPeers(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{DrainWindow: 100 * time.Millisecond}})
	env.Project(t, "WEB", "alice", "viewer")
	talker := login(t, env, codec.MsgPack, "alice")
	// A client that authenticates, then neither reads nor answers.
	silent := rawDial(t, env, textFrame(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":"`+env.Token(t, "alice")+`"}}`))
	silent.want(1)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := env.Server.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want the context's deadline", err)
	}
	// The library's close handshake would have waited 5 s for the peer.
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("Shutdown took %v: it waited for the silent peer's close handshake", d)
	}
	if code := talker.waitClose(5 * time.Second); code != websocket.StatusGoingAway {
		t.Fatalf("talking client: close %d, want 1001", code)
	}
	// The silent client's socket is closed: after the close frame, EOF.
	_ = silent.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, silent.br); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the silent client's connection stayed open")
		}
	}
	if n := metricValue(t, env.Server, "ballet_gateway_connections"); n != 0 {
		t.Fatalf("%v connections still open", n)
	}
}
