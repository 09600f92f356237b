package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/protocol"
)

// recvSeq receives the next event of sub and checks its seq.
func recvSeq(t testing.TB, sub *client.Subscription, want int64) {
	t.Helper()
	if ev := recv(t, sub); ev.Seq != want {
		t.Fatalf("event seq %d, want %d", ev.Seq, want)
	}
}

// Over HTTP each request is a POST with the connection's token; auth is checked with a
// system.ping, heartbeats are neither sent nor handed over, a subscription's lines arrive
// in order on its open response, and unsubscribing closes that request.
func TestHTTPTransportCarriesRequests(t *testing.T) {
	withPropagator(t, propagation.TraceContext{})
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cs := startContract(t, 20*time.Millisecond)
	tok := cs.mint("alice", time.Hour)
	c := dial(t, cs.url(), &client.Options{Token: client.StaticToken(tok), Transport: client.TransportHTTP})
	if c.Transport() != client.TransportHTTP || c.Subject() != "alice" {
		t.Fatalf("transport %q, subject %q", c.Transport(), c.Subject())
	}
	ctx, span := tp.Tracer("test").Start(context.Background(), "ping")
	if r, err := c.Ping(ctx); err != nil || r.Subject != "alice" {
		t.Fatalf("ping: %+v, %v", r, err)
	}
	span.End()
	ping := cs.lastPost("system.ping")
	if got := ping.header.Get("Authorization"); got != "Bearer "+tok {
		t.Fatalf("Authorization %q", got)
	}
	if got, want := ping.header.Get("Traceparent"), traceparent(span.SpanContext()); got != want {
		t.Fatalf("traceparent %q, want %q", got, want)
	}

	// Params that are not an object go to the server as they are, which answers them.
	if err := c.Call(context.Background(), "presence.get", []int{1}, nil); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	op := cs.next(t)
	sub2, err := c.Subscribe(context.Background(), "item:WEB-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	op2 := cs.next(t)
	for seq := int64(1); seq <= 3; seq++ {
		op.event(t, seq)
		op2.event(t, 10+seq)
		time.Sleep(30 * time.Millisecond) // heartbeats in between
	}
	for seq := int64(1); seq <= 3; seq++ {
		recvSeq(t, sub, seq)
		recvSeq(t, sub2, 10+seq)
	}
	if err := sub.Unsubscribe(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-op.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the unsubscribed response is still open")
	}
	op2.event(t, 14)
	recvSeq(t, sub2, 14)
	for _, m := range cs.methods() {
		if m != "system.ping" && m != "stream.subscribe" && m != "presence.get" {
			t.Fatalf("%s POSTed: %v", m, cs.methods())
		}
	}
	c.Close()
	select {
	case <-op2.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close left a response open")
	}
}

// A response that ends with an error without id ends the connection as a WebSocket close
// of its data.close would; one cut short as a lost connection; one that ends after
// stream.closed only that subscription, which subscribes again on the same connection. Each
// resumes from the last event delivered.
func TestHTTPTransportResponseEnds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cmd       streamCmd
		reconnect bool
		close     websocket.StatusCode // of the reconnect's cause; -1: not a close
	}{
		{"close 1001", streamCmd{line: `{"jsonrpc":"2.0","error":{"code":-32000,"message":"shutting down","data":{"close":1001}}}`, end: true}, true, 1001},
		{"close 4001", streamCmd{line: `{"jsonrpc":"2.0","error":{"code":-32001,"message":"token expired","data":{"close":4001}}}`, end: true}, true, 4001},
		{"cut", streamCmd{abort: true}, true, -1},
		{"ended without a word", streamCmd{end: true}, true, -1},
		{"lagging", streamCmd{line: `{"jsonrpc":"2.0","method":"stream.closed","params":{"subscription":"s1","reason":"lagging"}}`, end: true}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs := startContract(t, 50*time.Millisecond)
			var st states
			c := dial(t, cs.url(), &client.Options{Token: cs.minter("alice", time.Hour), Transport: client.TransportHTTP,
				OnStateChange: st.record})
			sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
			if err != nil {
				t.Fatal(err)
			}
			op := cs.next(t)
			op.event(t, 1)
			op.event(t, 2)
			recvSeq(t, sub, 1)
			recvSeq(t, sub, 2)
			op.do(t, tc.cmd)
			again := cs.next(t)
			if again.fromSeq == nil || *again.fromSeq != 2 {
				t.Fatalf("subscribed again from %v, want 2", again.fromSeq)
			}
			again.event(t, 2) // a duplicate, dropped
			again.event(t, 3)
			recvSeq(t, sub, 3)
			if !tc.reconnect {
				if n := st.count(client.StateReconnecting); n != 0 {
					t.Fatalf("reconnected: %v", st.errs(client.StateReconnecting))
				}
				return
			}
			errs := st.errs(client.StateReconnecting)
			if len(errs) != 1 || websocket.CloseStatus(errs[0]) != tc.close {
				t.Fatalf("reconnected for %v, want close status %d", errs, tc.close)
			}
		})
	}
}

// With nothing open the connection over HTTP stays up however silent; an open response
// that is silent for three heartbeat intervals is lost, and the client resumes.
func TestHTTPTransportHeartbeatSilence(t *testing.T) {
	t.Parallel()
	const iv = 200 * time.Millisecond
	cs := startContract(t, iv/2)
	var st states
	c := dial(t, cs.url(), &client.Options{Token: cs.minter("alice", time.Hour), Transport: client.TransportHTTP,
		HeartbeatInterval: iv, OnStateChange: st.record})
	time.Sleep(8 * iv)
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	op := cs.next(t)
	time.Sleep(8 * iv) // heartbeats keep it
	if n := st.count(client.StateReconnecting); n != 0 {
		t.Fatalf("reconnected while heartbeats came: %v", st.errs(client.StateReconnecting))
	}
	op.event(t, 1)
	recvSeq(t, sub, 1)
	op.do(t, streamCmd{silence: true})
	again := cs.next(t)
	if errs := st.errs(client.StateReconnecting); len(errs) != 1 || !errors.Is(errs[0], client.ErrHeartbeatTimeout) {
		t.Fatalf("reconnected for %v, want a heartbeat timeout", errs)
	}
	if again.fromSeq == nil || *again.fromSeq != 1 {
		t.Fatalf("subscribed again from %v, want 1", again.fromSeq)
	}
}

// An open response is silent for three of the intervals its header advertises when they are
// longer than the client's own: a server with slower heartbeats than the client expects is not
// taken for a dead one.
func TestHTTPTransportHeartbeatAdvertised(t *testing.T) {
	t.Parallel()
	const beat = 300 * time.Millisecond
	cs := startContract(t, beat)
	var st states
	c := dial(t, cs.url(), &client.Options{Token: cs.minter("alice", time.Hour), Transport: client.TransportHTTP,
		HeartbeatInterval: beat / 6, OnStateChange: st.record})
	if _, err := c.Subscribe(context.Background(), "project:WEB", nil); err != nil {
		t.Fatal(err)
	}
	op := cs.next(t)
	time.Sleep(6 * beat)
	if errs := st.errs(client.StateReconnecting); len(errs) != 0 {
		t.Fatalf("reconnected for %v while the server's heartbeats came at the interval it advertised", errs)
	}
	op.do(t, streamCmd{silence: true})
	cs.next(t)
	if errs := st.errs(client.StateReconnecting); len(errs) != 1 || !errors.Is(errs[0], client.ErrHeartbeatTimeout) {
		t.Fatalf("reconnected for %v, want a heartbeat timeout", errs)
	}
}

// A line longer than ReadLimit ends the connection with an error that says so.
func TestHTTPTransportLineLimit(t *testing.T) {
	t.Parallel()
	cs := startContract(t, 50*time.Millisecond)
	var st states
	c := dial(t, cs.url(), &client.Options{Token: cs.minter("alice", time.Hour), Transport: client.TransportHTTP,
		ReadLimit: 1024, OnStateChange: st.record})
	if _, err := c.Subscribe(context.Background(), "project:WEB", nil); err != nil {
		t.Fatal(err)
	}
	op := cs.next(t)
	op.do(t, streamCmd{line: `{"jsonrpc":"2.0","method":"stream.event","params":{"pad":"` + strings.Repeat("p", 2048) + `"}}`})
	cs.next(t)
	if errs := st.errs(client.StateReconnecting); len(errs) != 1 || !strings.Contains(errs[0].Error(), "ReadLimit 1024") {
		t.Fatalf("reconnected for %v, want the line limit", errs)
	}
}

// The token is checked with system.ping: one the server refuses fails Dial with -32001;
// auth.refresh's new token is used by the POSTs after it.
func TestHTTPTransportAuth(t *testing.T) {
	t.Parallel()
	cs := startContract(t, 50*time.Millisecond)
	expired := authtest.Mint(t, cs.iss, "alice", auth.TokenOptions{Audience: []string{"ballet-test"},
		IssuedAt: time.Now().Add(-2 * time.Hour), TTL: time.Hour})
	_, err := client.Dial(context.Background(), cs.url(), &client.Options{Token: client.StaticToken(expired),
		Transport: client.TransportHTTP})
	if !errors.Is(err, protocol.ErrUnauthenticated) {
		t.Fatalf("dial with an expired token: %v", err)
	}
	// Refreshed at 80 % of a 2-3 s life (expiry has second resolution).
	c := dial(t, cs.url(), &client.Options{Token: cs.minter("alice", 3*time.Second), Transport: client.TransportHTTP})
	first := cs.lastPost("system.ping").header.Get("Authorization")
	time.Sleep(3500 * time.Millisecond)
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cs.lastPost("system.ping").header.Get("Authorization") == first {
		t.Fatal("the refreshed token is not used")
	}
}

// TransportAuto falls back to HTTP when the upgrade is refused by something in between, and
// keeps to it for WebSocketRetry; it waits out a 503 instead.
func TestAutoFallsBackToHTTP(t *testing.T) {
	t.Parallel()
	cs := startContract(t, 50*time.Millisecond)
	var logs logBuffer
	var st states
	c := dial(t, cs.url(), &client.Options{Token: cs.minter("alice", time.Hour), Logger: logs.logger(),
		WebSocketRetry: 500 * time.Millisecond, OnStateChange: st.record})
	if c.Transport() != client.TransportHTTP || cs.upgrades() != 1 {
		t.Fatalf("transport %q after %d upgrades", c.Transport(), cs.upgrades())
	}
	if _, err := c.Subscribe(context.Background(), "project:WEB", nil); err != nil {
		t.Fatal(err)
	}
	end := streamCmd{line: `{"jsonrpc":"2.0","error":{"code":-32000,"message":"shutting down","data":{"close":1001}}}`, end: true}
	cs.next(t).do(t, end)
	second := cs.next(t) // again over HTTP, without trying a WebSocket within WebSocketRetry
	if n := cs.upgrades(); n != 1 {
		t.Fatalf("%d upgrades within WebSocketRetry", n)
	}
	time.Sleep(600 * time.Millisecond)
	if n := cs.upgrades(); n != 1 {
		t.Fatalf("a working connection was ended to try a WebSocket: %d upgrades", n)
	}
	second.do(t, end)
	cs.next(t)
	if n := cs.upgrades(); n != 2 {
		t.Fatalf("%d upgrades, want one more after WebSocketRetry", n)
	}
	if n := strings.Count(logs.String(), "the connection goes over HTTP"); n != 1 {
		t.Fatalf("the switch logged %d times:\n%s", n, logs.String())
	}

	cs.mu.Lock()
	cs.upgrade = http.StatusServiceUnavailable
	cs.mu.Unlock()
	_, err := client.Dial(context.Background(), cs.url(), &client.Options{Token: cs.minter("alice", time.Hour)})
	var he *client.HandshakeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial refused with 503: %v, want the HandshakeError", err)
	}
}

// TransportAuto falls back to HTTP too when the upgrade gets no answer: its connection reset
// or closed by something in between, or left unanswered past ConnectTimeout (the attempt over
// HTTP then has a ConnectTimeout of its own). HTTP is then kept, reconnects included.
func TestAutoFallsBackWithoutAnAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		upgrade int
	}{{"reset", upgradeReset}, {"closed", upgradeClosed}, {"unanswered", upgradeHang}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs := startContract(t, 50*time.Millisecond)
			cs.upgrade = tc.upgrade
			var logs logBuffer
			c := dial(t, cs.url(), &client.Options{Token: cs.minter("alice", time.Hour), Logger: logs.logger(),
				ConnectTimeout: 2 * time.Second})
			if c.Transport() != client.TransportHTTP || cs.upgrades() != 1 {
				t.Fatalf("transport %q after %d upgrades", c.Transport(), cs.upgrades())
			}
			if !strings.Contains(logs.String(), "the WebSocket did not open: the connection goes over HTTP") {
				t.Fatalf("the switch is not logged:\n%s", logs.String())
			}
			sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
			if err != nil {
				t.Fatal(err)
			}
			op := cs.next(t)
			op.event(t, 1)
			recvSeq(t, sub, 1)
			op.do(t, streamCmd{abort: true})
			again := cs.next(t)
			if again.fromSeq == nil || *again.fromSeq != 1 {
				t.Fatalf("subscribed again from %v, want 1", again.fromSeq)
			}
			again.event(t, 2)
			recvSeq(t, sub, 2)
			if n := cs.upgrades(); n != 1 {
				t.Fatalf("%d upgrades: the reconnect did not keep to HTTP", n)
			}
		})
	}
}

// When HTTP fails too, the attempt fails with both errors; an address where nothing listens,
// or a WebSocket that opens without the codec's subprotocol, is not tried over HTTP at all.
func TestAutoFallBackFailing(t *testing.T) {
	t.Parallel()
	cs := startContract(t, 50*time.Millisecond)
	cs.upgrade = upgradeReset
	cs.postDown = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := client.Dial(ctx, cs.url(), &client.Options{Token: cs.minter("alice", time.Hour)})
	if err == nil || !strings.Contains(err.Error(), "; over HTTP: ") || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("dial with both ways down: %v, want the WebSocket's reset and the failure over HTTP", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = client.Dial(ctx, "ws://"+addr+"/rpc", &client.Options{Token: cs.minter("alice", time.Hour)})
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "over HTTP") {
		t.Fatalf("dial where nothing listens: %v, want the refused connection only", err)
	}

	var posts atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			posts.Add(1)
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		ws, err := websocket.Accept(w, r, nil) // no subprotocol chosen
		if err == nil {
			_ = ws.CloseNow()
		}
	}))
	defer other.Close()
	_, err = client.Dial(ctx, "ws"+strings.TrimPrefix(other.URL, "http")+"/rpc", &client.Options{Token: cs.minter("alice", time.Hour)})
	if !errors.Is(err, client.ErrSubprotocol) || posts.Load() != 0 {
		t.Fatalf("dial of a WebSocket without the subprotocol: %v after %d POSTs, want ErrSubprotocol and none", err, posts.Load())
	}
}
