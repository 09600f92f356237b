package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/internal/nginxtest"
)

// insertEvent writes an event of item key into the log with plain SQL, as any program may,
// and returns its seq.
func insertEvent(t testing.TB, env *gatewaytest.Env, key string) int64 {
	t.Helper()
	var seq int64
	err := env.Pool.QueryRow(context.Background(), `INSERT INTO events (project_key, type, entity_type, entity_id,
			entity_key, actor_kind, actor_subject, payload)
		VALUES ('WEB', 'test.tick', 'item', $1, $1, 'service', 'importer', '{"n":1}') RETURNING seq`, key).Scan(&seq)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// Over HTTP against the gateway: ping, two subscriptions at once with the live events of
// each, and an unsubscribe that ends its response on the server.
func TestHTTPEndToEnd(t *testing.T) {
	t.Parallel()
	env := startEnv(t, true, gateway.Config{})
	c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token,
		Transport: client.TransportHTTP})
	if r, err := c.Ping(context.Background()); err != nil || r.Subject != "alice" || c.Transport() != client.TransportHTTP {
		t.Fatalf("ping: %+v, %v over %q", r, err, c.Transport())
	}
	project, err := c.Subscribe(context.Background(), "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	item, err := c.Subscribe(context.Background(), "item:WEB-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var all, one []int64
	for i := range 6 {
		key := fmt.Sprintf("WEB-%d", i%2)
		seq := insertEvent(t, env, key)
		all = append(all, seq)
		if key == "WEB-1" {
			one = append(one, seq)
		}
	}
	for _, w := range all {
		recvSeq(t, project, w)
	}
	for _, w := range one {
		recvSeq(t, item, w)
	}
	if err := item.Unsubscribe(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the gateway to end the unsubscribed response", 30*time.Second, func() bool {
		return subscriptions(env) == 1
	})
	recvSeq(t, project, insertEvent(t, env, "WEB-1"))
}

// The gateway's heartbeats on an open response keep an idle subscription over HTTP, on which
// the client sends nothing, for many intervals.
func TestHTTPHeartbeatsKeepIdleSubscription(t *testing.T) {
	t.Parallel()
	// Long enough that a loaded machine's pauses of the heartbeats do not add up to three.
	const iv = 400 * time.Millisecond
	env := startEnv(t, true, gateway.Config{HeartbeatInterval: iv})
	var st states
	c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token,
		Transport: client.TransportHTTP, HeartbeatInterval: iv, OnStateChange: st.record})
	sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * iv)
	if n := st.count(client.StateReconnecting); n != 0 {
		t.Fatalf("reconnected while idle: %v", st.errs(client.StateReconnecting))
	}
	recvSeq(t, sub, insertEvent(t, env, "WEB-1"))
}

// A token that expires ends every open response (-32001, close 4001); the client reconnects
// with a new token and resumes from the last event delivered: no gap, no duplicate.
func TestHTTPTokenExpiryResumes(t *testing.T) {
	t.Parallel()
	env := startEnv(t, true, gateway.Config{})
	var st states
	// Expiry has second resolution: a life of 2-3 s.
	c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice", ttl: 3 * time.Second}).Token,
		Transport: client.TransportHTTP, OnStateChange: st.record})
	sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	col := collect(sub)
	var a appender
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		a.append(t, env, 2)
	}
	total := len(a.all())
	waitFor(t, "every event", 30*time.Second, func() bool { return col.len() >= total })
	time.Sleep(200 * time.Millisecond)
	checkExactlyOnce(t, col.seqs(), a.all())
	expired := 0
	for _, err := range st.errs(client.StateReconnecting) {
		if websocket.CloseStatus(err) == 4001 {
			expired++
		}
	}
	if expired < 2 {
		t.Fatalf("%d ends for the token's expiry, want 2 or more: %v", expired, st.errs(client.StateReconnecting))
	}
}

// TransportAuto through a proxy that refuses WebSocket upgrades (403), ends them unanswered
// (444), or strips them (the gateway sees a plain GET), goes over HTTP and works, also through
// a buffering proxy; against
// the gateway itself it uses a WebSocket.
func TestAutoThroughProxies(t *testing.T) {
	for _, o := range []nginxtest.Options{
		{WebSocket: nginxtest.Refuse},
		{WebSocket: nginxtest.Close},
		{WebSocket: nginxtest.Strip, Buffering: true},
	} {
		t.Run(fmt.Sprintf("%v buffering=%v", o.WebSocket, o.Buffering), func(t *testing.T) {
			t.Parallel()
			env := startEnv(t, true, gateway.Config{})
			o.Upstreams = []string{env.HTTP.Listener.Addr().String()}
			px := nginxtest.Start(t, o)
			var logs logBuffer
			c := dial(t, "ws://"+px.Addr()+"/rpc", &client.Options{Token: (&minter{env: env, subject: "alice"}).Token,
				Logger: logs.logger()})
			if c.Transport() != client.TransportHTTP {
				t.Fatalf("over %q through the proxy", c.Transport())
			}
			if !strings.Contains(logs.String(), "the connection goes over HTTP") {
				t.Fatalf("the switch is not logged:\n%s", logs.String())
			}
			sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
			if err != nil {
				t.Fatalf("%v\nnginx: %s", err, px.Logs())
			}
			for range 3 {
				recvSeq(t, sub, insertEvent(t, env, "WEB-1"))
			}
		})
	}
	t.Run("gateway", func(t *testing.T) {
		t.Parallel()
		env := startEnv(t, false, gateway.Config{})
		c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
		if c.Transport() != client.TransportWebSocket {
			t.Fatalf("over %q against the gateway", c.Transport())
		}
	})
}

// Calls of an application while the connection over HTTP comes and goes end each with the
// result or ErrConnectionLost, never hang.
func TestHTTPCallsAcrossReconnects(t *testing.T) {
	t.Parallel()
	env := startEnv(t, false, gateway.Config{})
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	c := dial(t, p.URL(), &client.Options{Token: (&minter{env: env, subject: "alice"}).Token,
		Transport: client.TransportHTTP})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := c.Ping(ctx)
				cancel()
				if err != nil && !errors.Is(err, client.ErrConnectionLost) {
					t.Errorf("ping: %v", err)
					return
				}
			}
		}()
	}
	for range 3 {
		time.Sleep(200 * time.Millisecond)
		p.Drop()
	}
	close(stop)
	wg.Wait()
	if _, err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
