package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

func TestPingAndClose(t *testing.T) {
	for _, cd := range codecs {
		t.Run(codecName(cd), func(t *testing.T) {
			env := startEnv(t, false, gateway.Config{})
			var st states
			m := &minter{env: env, subject: "alice"}
			c := dial(t, env.URL, &client.Options{Token: m.Token, Codec: cd, OnStateChange: st.record})
			ctx := context.Background()
			res, err := c.Ping(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Subject != "alice" || res.Time == 0 || c.Subject() != "alice" {
				t.Fatalf("ping: %+v, subject %q", res, c.Subject())
			}
			if c.State() != client.StateConnected {
				t.Fatalf("state %v", c.State())
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c.Close() // twice is fine
			if c.State() != client.StateClosed {
				t.Fatalf("state after Close: %v", c.State())
			}
			if _, err := c.Ping(ctx); !errors.Is(err, client.ErrClosed) {
				t.Fatalf("ping after Close: %v", err)
			}
			if _, err := c.Subscribe(ctx, "project:WEB", nil); !errors.Is(err, client.ErrClosed) {
				t.Fatalf("subscribe after Close: %v", err)
			}
			want := []client.State{client.StateConnecting, client.StateConnected, client.StateClosed}
			st.mu.Lock()
			defer st.mu.Unlock()
			if len(st.log) != len(want) {
				t.Fatalf("states %v, want %v", st.log, want)
			}
			for i, s := range want {
				if st.log[i].state != s {
					t.Fatalf("states %v, want %v", st.log, want)
				}
			}
		})
	}
}

func TestDialErrors(t *testing.T) {
	env := startEnv(t, false, gateway.Config{})
	ctx := context.Background()
	if _, err := client.Dial(ctx, env.URL, nil); err == nil {
		t.Fatal("Dial without options succeeded")
	}
	_, err := client.Dial(ctx, env.URL, &client.Options{Token: client.StaticToken("not a token")})
	if !errors.Is(err, protocol.ErrUnauthenticated) {
		t.Fatalf("bad token: %v", err)
	}
	expired := mintExpired(t, env, "alice")
	_, err = client.Dial(ctx, env.URL, &client.Options{Token: client.StaticToken(expired)})
	if !errors.Is(err, protocol.ErrUnauthenticated) {
		t.Fatalf("expired token: %v", err)
	}
	boom := errors.New("no token today")
	_, err = client.Dial(ctx, env.URL, &client.Options{Token: func(context.Context) (string, error) { return "", boom }})
	if !errors.Is(err, boom) {
		t.Fatalf("token source error: %v", err)
	}
	_, err = client.Dial(ctx, env.BaseURL+"/nothing-here", &client.Options{Token: client.StaticToken("x")})
	if err == nil {
		t.Fatal("dial of a non-WebSocket path succeeded")
	}
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	p.Stop()
	_, err = client.Dial(ctx, p.URL(), &client.Options{Token: client.StaticToken("x")})
	if err == nil {
		t.Fatal("dial of a closed port succeeded")
	}
}

func TestCall(t *testing.T) {
	env := startEnv(t, false, gateway.Config{})
	m := &minter{env: env, subject: "alice"}
	c := dial(t, env.URL, &client.Options{Token: m.Token})
	ctx := context.Background()
	var res map[string]any
	if err := c.Call(ctx, "system.ping", nil, &res); err != nil || res["subject"] != "alice" {
		t.Fatalf("call system.ping: %v %v", res, err)
	}
	err := c.Call(ctx, "no.such.method", nil, nil)
	if !errors.Is(err, rpc.ErrMethodNotFound) {
		t.Fatalf("unknown method: %v", err)
	}
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != -32601 {
		t.Fatalf("unknown method: %#v", err)
	}
	if err := c.Notify(ctx, "$/heartbeat", map[string]int64{"time": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// Raw params with bytes that are not UTF-8 go out as U+FFFD, so the
// gateway, which closes 1007 on a text frame that is not UTF-8, answers
// them like any other request.
func TestCallWithInvalidUTF8(t *testing.T) {
	env := startEnv(t, false, gateway.Config{})
	var st states
	m := &minter{env: env, subject: "alice"}
	c := dial(t, env.URL, &client.Options{Token: m.Token, Codec: codec.JSON, OnStateChange: st.record})
	ctx := context.Background()
	err := c.Call(ctx, "stream.unsubscribe", codec.RawJSON("{\"subscription\":\"x\xff\xfe\"}"), nil)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != -32004 || re.Message != "subscription \"x\uFFFD\" not found" {
		t.Fatalf("got %v", err)
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if n := st.count(client.StateReconnecting); n != 0 {
		t.Fatalf("the connection was lost %d times", n)
	}
}

func TestSubscribeDeliversEvents(t *testing.T) {
	for _, cd := range codecs {
		t.Run(codecName(cd), func(t *testing.T) {
			env := startEnv(t, false, gateway.Config{})
			m := &minter{env: env, subject: "alice"}
			c := dial(t, env.URL, &client.Options{Token: m.Token, Codec: cd})
			ctx := context.Background()
			sub, err := c.Subscribe(ctx, "project:WEB", nil)
			if err != nil {
				t.Fatal(err)
			}
			if sub.Stream() != "project:WEB" || sub.Seq() == 0 || sub.ID() == "" {
				t.Fatalf("subscription %s %s seq %d", sub.ID(), sub.Stream(), sub.Seq())
			}
			var a appender
			a.append(t, env, 3)
			want := a.all()
			for i := range 3 {
				ev := recv(t, sub)
				if ev.Seq != want[i] || ev.Type != "test.tick" || ev.Subscription != sub.ID() ||
					ev.EntityType != "item" || ev.EntityKey == "" || ev.Actor.Kind != "system" ||
					ev.Actor.Subject != "test" || payloadN(t, ev) != i || time.Since(ev.Time()) > time.Minute {
					t.Fatalf("event %d: %+v (payload %s)", i, ev, ev.Payload)
				}
			}
			if sub.LastSeq() != want[2] {
				t.Fatalf("LastSeq %d, want %d", sub.LastSeq(), want[2])
			}
			// entity_key null and an empty payload decode in both codecs.
			seq, err := env.Store.Append(ctx, streams.NewEvent{ProjectKey: "WEB", Type: "test.tick", EntityType: "project",
				EntityID: "WEB", ActorKind: "system", ActorSubject: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if ev := recv(t, sub); ev.Seq != seq || ev.EntityKey != "" || string(ev.Payload) != "{}" {
				t.Fatalf("event without key: %+v payload %s", ev, ev.Payload)
			}
			if err := sub.Unsubscribe(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := <-sub.Events(); ok {
				t.Fatal("event after Unsubscribe")
			}
			if sub.Err() != nil {
				t.Fatalf("Err after Unsubscribe: %v", sub.Err())
			}
			if err := c.Unsubscribe(ctx, sub.ID()); !errors.Is(err, protocol.ErrNotFound) {
				t.Fatalf("second Unsubscribe: %v", err)
			}
			waitFor(t, "the server to drop the subscription", 30*time.Second, func() bool {
				return subscriptions(env) == 0
			})
		})
	}
}

func recv(t testing.TB, sub *client.Subscription) client.Event {
	t.Helper()
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			if ev.Type == "test.tick" {
				return ev
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no event within 30s")
		}
	}
}

func TestSubscribeFromSeqReplays(t *testing.T) {
	env := startEnv(t, false, gateway.Config{})
	var a appender
	a.append(t, env, 5)
	seqs := a.all()
	m := &minter{env: env, subject: "bob"}
	c := dial(t, env.URL, &client.Options{Token: m.Token})
	from := seqs[1]
	sub, err := c.Subscribe(context.Background(), "project:WEB", &client.SubscribeOptions{FromSeq: &from})
	if err != nil {
		t.Fatal(err)
	}
	a.append(t, env, 2)
	want := a.all()[2:]
	for i, w := range want {
		if ev := recv(t, sub); ev.Seq != w {
			t.Fatalf("event %d: seq %d, want %d", i, ev.Seq, w)
		}
	}
}

func TestSubscribeErrors(t *testing.T) {
	env := startEnv(t, false, gateway.Config{ReplayLimit: 5})
	var a appender
	a.append(t, env, 10)
	ctx := context.Background()
	alice := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
	carol := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "carol"}).Token})
	zero := int64(0)
	for _, tc := range []struct {
		name   string
		c      *client.Client
		stream string
		opts   *client.SubscribeOptions
		want   error
	}{
		{"unknown project", alice, "project:NOPE", nil, protocol.ErrNotFound},
		{"not a member", carol, "project:WEB", nil, protocol.ErrForbidden},
		{"bad stream", alice, "nonsense", nil, rpc.ErrInvalidParams},
		{"from_seq too old", alice, "project:WEB", &client.SubscribeOptions{FromSeq: &zero}, protocol.ErrResyncRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Subscribe(ctx, tc.stream, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// Failed subscriptions leave nothing behind on either side.
	if n := subscriptions(env); n != 0 {
		t.Fatalf("%d subscriptions left on the server", n)
	}
}

func TestRevokedAccessEndsSubscription(t *testing.T) {
	env := startEnv(t, false, gateway.Config{})
	c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "bob"}).Token})
	ctx := context.Background()
	sub, err := c.Subscribe(ctx, "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Revoke(ctx, "WEB", "bob", "human", "alice"); err != nil {
		t.Fatal(err)
	}
	for range sub.Events() {
	}
	var ce *client.ClosedError
	if !errors.Is(sub.Err(), protocol.ErrForbidden) || !errors.As(sub.Err(), &ce) || ce.Reason != "forbidden" {
		t.Fatalf("Err: %v", sub.Err())
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Fatalf("the connection should go on: %v", err)
	}
	if err := sub.Unsubscribe(ctx); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("Unsubscribe of an ended subscription: %v", err)
	}
}

func TestSlowConsumerEndsSubscription(t *testing.T) {
	env := startEnv(t, false, gateway.Config{})
	c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
	ctx := context.Background()
	slow, err := c.Subscribe(ctx, "project:WEB", &client.SubscribeOptions{Buffer: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Another filter selecting every event: a connection follows a stream with one filter once.
	other, err := c.Subscribe(ctx, "project:WEB", &client.SubscribeOptions{Types: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	var a appender
	a.append(t, env, 10)
	want := a.all()
	// The slow subscription keeps what fit, then ends.
	waitFor(t, "the slow subscription to end", 30*time.Second, func() bool { return slow.Err() != nil })
	var got []int64
	for ev := range slow.Events() {
		got = append(got, ev.Seq)
	}
	if !errors.Is(slow.Err(), client.ErrSlowConsumer) {
		t.Fatalf("Err: %v", slow.Err())
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("slow subscription delivered %v, want the first two of %v", got, want)
	}
	// The other one and the connection are unaffected.
	for i, w := range want {
		if ev := recv(t, other); ev.Seq != w {
			t.Fatalf("other: event %d seq %d, want %d", i, ev.Seq, w)
		}
	}
	waitFor(t, "the slow subscription to be unsubscribed on the server", 30*time.Second, func() bool {
		return subscriptions(env) == 1
	})
}

func TestCloseEndsSubscriptions(t *testing.T) {
	env := startEnv(t, false, gateway.Config{})
	c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
	sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, ok := <-sub.Events(); ok {
		t.Fatal("event after Close")
	}
	if !errors.Is(sub.Err(), client.ErrClosed) {
		t.Fatalf("Err: %v", sub.Err())
	}
	waitFor(t, "the server to see the connection end", 30*time.Second, func() bool {
		return env.Server.Sessions() == 0
	})
}

// subscriptions counts the subscriptions the gateway holds.
func subscriptions(env *gatewaytest.Env) int {
	return int(metric(env, "ballet_gateway_subscriptions"))
}

// metric sums the values of a gateway metric over its labels, or over
// those with the given label pairs ("method", "planner.send").
func metric(env *gatewaytest.Env, name string, labels ...string) float64 {
	mfs, err := env.Server.Metrics().Registry.Gather()
	if err != nil {
		panic(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			switch {
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			}
		}
	}
	return sum
}

// Close does not wait for a server that no longer answers.
func TestCloseSilentServer(t *testing.T) {
	t.Parallel()
	env := startEnv(t, false, gateway.Config{})
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	c := dial(t, p.URL(), &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
	p.Freeze()
	start := time.Now()
	c.Close()
	t.Logf("Close returned after %v", time.Since(start))
	if c.State() != client.StateClosed {
		t.Fatalf("state %v", c.State())
	}
}
