package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/protocol"
)

// A connection outlives several short-lived tokens because the client
// refreshes each at 80 % of its lifetime.
func TestRefreshKeepsConnectionAlive(t *testing.T) {
	t.Parallel()
	env := startEnv(t, false, gateway.Config{})
	var st states
	// Refreshed at 80 % of a 4-5 s life (expiry has second resolution): a loaded machine
	// has about a second to answer the refresh before the token expires.
	m := &minter{env: env, subject: "alice", ttl: 5 * time.Second}
	c := dial(t, env.URL, &client.Options{Token: m.Token, OnStateChange: st.record})
	ctx := context.Background()
	sub, err := c.Subscribe(ctx, "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(12 * time.Second) // well past the first token's expiry, two refreshes
	var a appender
	for time.Now().Before(deadline) {
		if _, err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		a.append(t, env, 1)
		time.Sleep(250 * time.Millisecond)
	}
	for i, w := range a.all() {
		if ev := recv(t, sub); ev.Seq != w {
			t.Fatalf("event %d: seq %d, want %d", i, ev.Seq, w)
		}
	}
	if n := st.count(client.StateConnected); n != 1 {
		t.Fatalf("connected %d times, want once: %v", n, st.errs(client.StateReconnecting))
	}
	if n := metric(env, "ballet_gateway_connects_total"); n != 1 {
		t.Fatalf("the gateway accepted %v connections, want 1", n)
	}
	if n := m.calls.Load(); n < 3 {
		t.Fatalf("token source called %d times, want the first auth and at least two refreshes", n)
	}
}

// Without a new token the connection ends at expiry (4001) and reconnect
// attempts with the expired token are refused: the refresh above is what
// keeps a connection alive. After AuthRetries refusals in a row the client
// gives up and tells its caller, rather than reconnecting for ever.
func TestExpiredTokenEndsConnection(t *testing.T) {
	t.Parallel()
	env := startEnv(t, false, gateway.Config{})
	var st states
	tok := mint(t, env, "alice", 2*time.Second)
	c := dial(t, env.URL, &client.Options{Token: client.StaticToken(tok), OnStateChange: st.record,
		AuthRetries: 2, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the client to give up", 30*time.Second, func() bool { return c.State() == client.StateFailed })
	refused := 0
	for _, err := range st.errs(client.StateReconnecting) {
		if errors.Is(err, protocol.ErrUnauthenticated) {
			refused++
		}
	}
	// The last refusal is told as the failure, not as one more reconnect.
	if refused != 1 {
		t.Fatalf("%d refused reconnects told as reconnecting, want 1 (AuthRetries 2)", refused)
	}
	if failed := st.errs(client.StateFailed); len(failed) != 1 || !errors.Is(failed[0], protocol.ErrUnauthenticated) {
		t.Fatalf("StateFailed told with %v, want one error matching ErrUnauthenticated", failed)
	}
	for _, err := range []error{c.Err(), c.Call(context.Background(), "system.ping", nil, nil)} {
		if !errors.Is(err, client.ErrClosed) || !errors.Is(err, protocol.ErrUnauthenticated) {
			t.Fatalf("after giving up: %v, want an error matching ErrClosed and ErrUnauthenticated", err)
		}
	}
	for range sub.Events() {
	}
	if err := sub.Err(); !errors.Is(err, protocol.ErrUnauthenticated) {
		t.Fatalf("the subscription ended with %v, want the refusal", err)
	}
	if n := metric(env, "ballet_gateway_connects_total"); n != 3 {
		t.Fatalf("connects %v, want 3: the first and two refused", n)
	}
}

// Every event reaches the application exactly once and in order while
// events are appended continuously and the connection is disrupted.
func TestReconnectDeliversEveryEventOnce(t *testing.T) {
	disruptions := []struct {
		name    string
		disrupt func(p *proxy)
	}{
		// The gateway goes away: the port refuses connections for a while.
		{"server restart", func(p *proxy) {
			p.Stop()
			time.Sleep(300 * time.Millisecond)
			p.Start()
		}},
		// The TCP connection is reset; the gateway is reachable at once.
		{"dropped connection", func(p *proxy) { p.Drop() }},
	}
	for _, d := range disruptions {
		for _, cr := range carriers {
			t.Run(d.name+"/"+cr.name, func(t *testing.T) {
				t.Parallel()
				env := startEnv(t, true, gateway.Config{})
				p := startProxy(t, env.HTTP.Listener.Addr().String())
				var st states
				c := dial(t, p.URL(), &client.Options{
					Token: (&minter{env: env, subject: "alice"}).Token, Codec: cr.codec, Transport: cr.transport,
					OnStateChange: st.record,
				})
				sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
				if err != nil {
					t.Fatal(err)
				}
				col := collect(sub)
				var a appender
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						a.append(t, env, 2)
						time.Sleep(3 * time.Millisecond)
					}
				}()
				for i, at := range []int{100, 200, 300} {
					waitFor(t, fmt.Sprintf("%d events", at), 30*time.Second, func() bool { return col.len() >= at })
					d.disrupt(p)
					waitFor(t, "the reconnect", 30*time.Second, func() bool { return st.count(client.StateConnected) >= i+2 })
				}
				waitFor(t, "more events", 30*time.Second, func() bool { return col.len() >= 400 })
				close(stop)
				wg.Wait()
				total := len(a.all())
				waitFor(t, "every event", 30*time.Second, func() bool { return col.len() >= total })
				time.Sleep(200 * time.Millisecond) // room for a duplicate to show
				checkExactlyOnce(t, col.seqs(), a.all())
				c.Close()
				<-col.done
			})
		}
	}
}

// The server cannot replay that far back (-32010): OnResync runs, and the
// application then gets every event after the new position, after the hook.
func TestResyncHook(t *testing.T) {
	for _, withHook := range []bool{true, false} {
		t.Run(fmt.Sprintf("hook=%v", withHook), func(t *testing.T) {
			env := startEnv(t, true, gateway.Config{ReplayLimit: 5})
			p := startProxy(t, env.HTTP.Listener.Addr().String())
			c := dial(t, p.URL(), &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
			var col *collector
			var resyncs atomic.Int64
			var resyncSeq atomic.Int64
			opts := &client.SubscribeOptions{}
			if withHook {
				opts.OnResync = func(seq int64) {
					resyncs.Add(1)
					resyncSeq.Store(seq)
					col.mark("resync")
				}
			}
			sub, err := c.Subscribe(context.Background(), "project:WEB", opts)
			if err != nil {
				t.Fatal(err)
			}
			col = collect(sub)
			var a appender
			a.append(t, env, 3)
			waitFor(t, "the first events", 30*time.Second, func() bool { return col.len() == 3 })
			before := a.all()

			p.Stop()
			a.append(t, env, 20) // more than the replay limit while away
			gap := a.all()[3:]
			p.Start()

			if !withHook {
				<-col.done
				if !errors.Is(sub.Err(), protocol.ErrResyncRequired) {
					t.Fatalf("Err: %v", sub.Err())
				}
				checkExactlyOnce(t, col.seqs(), before)
				return
			}
			waitFor(t, "the resync hook", 30*time.Second, func() bool { return resyncs.Load() == 1 })
			if h := resyncSeq.Load(); h < gap[len(gap)-1] {
				t.Fatalf("resync at seq %d, before the end of the gap %d", h, gap[len(gap)-1])
			}
			a.append(t, env, 4)
			after := a.all()[23:]
			waitFor(t, "events after the resync", 30*time.Second, func() bool { return col.len() == 7 })
			time.Sleep(200 * time.Millisecond)
			checkExactlyOnce(t, col.seqs(), append(before, after...))
			col.mu.Lock()
			defer col.mu.Unlock()
			if want := fmt.Sprintf("event %d", after[0]); col.log[3] != "resync" || col.log[4] != want {
				t.Fatalf("order: %v, want the resync mark before %s", col.log, want)
			}
		})
	}
}

// A connection on which the server falls silent is given up after three
// heartbeat intervals; the client reconnects and resumes.
func TestHeartbeatSilenceReconnects(t *testing.T) {
	t.Parallel()
	// Long enough that a loaded machine's pauses of the heartbeats do not add up to three.
	const iv = 500 * time.Millisecond
	env := startEnv(t, true, gateway.Config{HeartbeatInterval: iv})
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	var st states
	c := dial(t, p.URL(), &client.Options{
		Token: (&minter{env: env, subject: "alice"}).Token, HeartbeatInterval: iv, OnStateChange: st.record,
	})
	sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	col := collect(sub)
	var a appender

	// Heartbeats keep an idle connection up for many intervals.
	time.Sleep(8 * iv)
	if n := st.count(client.StateReconnecting); n != 0 {
		t.Fatalf("reconnected while idle: %v", st.errs(client.StateReconnecting))
	}

	a.append(t, env, 2)
	waitFor(t, "the first events", 30*time.Second, func() bool { return col.len() == 2 })
	p.Freeze()
	a.append(t, env, 3) // sent into the frozen connection, replayed after
	waitFor(t, "a heartbeat timeout", 30*time.Second, func() bool {
		for _, err := range st.errs(client.StateReconnecting) {
			if errors.Is(err, client.ErrHeartbeatTimeout) {
				return true
			}
		}
		return false
	})
	waitFor(t, "the reconnect", 30*time.Second, func() bool { return st.count(client.StateConnected) == 2 })
	a.append(t, env, 2)
	waitFor(t, "every event", 30*time.Second, func() bool { return col.len() == 7 })
	time.Sleep(100 * time.Millisecond)
	checkExactlyOnce(t, col.seqs(), a.all())
}

// A subscription that falls behind while its client does not read catches up once it
// reads again, every event once, while it is at most BALLET_CATCH_UP_LIMIT events behind (100
// here; the window of recent events is 64 KiB). Further behind, the server closes it lagging
// and the client subscribes again from the last delivered seq: within BALLET_REPLAY_LIMIT
// (300 here) that replay gives every event after it once, in order, with no gap; further
// still, it is answered -32010, and OnResync starts it again from the seq it names: events
// before the close come in order, once, and every event after that seq arrives.
func TestLaggingResubscribes(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{RecentBytes: 64 << 10, CatchUpLimit: 100,
		Config: gateway.Config{ReplayLimit: 300}})
	env.Project(t, "WEB", "alice", "admin", "bob", "viewer")
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	c := dial(t, p.URL(), &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
	resynced := make(chan int64, 1)
	sub, err := c.Subscribe(context.Background(), "project:WEB", &client.SubscribeOptions{OnResync: func(seq int64) { resynced <- seq }})
	if err != nil {
		t.Fatal(err)
	}
	col := collect(sub)
	var a appender
	a.append(t, env, 10)
	waitFor(t, "the first events", 30*time.Second, func() bool { return col.len() == 10 })
	// paused appends n events of pad bytes while the client does not read, and lets it read
	// once the gateway has dispatched them all.
	paused := func(n, pad int) {
		p.Pause()
		for range n / 10 {
			a.appendPadded(t, env, 10, pad)
		}
		all := a.all()
		waitFor(t, "the dispatch", 30*time.Second, func() bool { return env.Tailer.Position() >= all[len(all)-1] })
		p.Resume()
	}

	// 60 events of 2 KB while it does not read: more than the window, fewer than the limit.
	paused(60, 2<<10)
	waitFor(t, "the catch-up", 30*time.Second, func() bool { return col.len() == 70 })
	checkExactlyOnce(t, col.seqs(), a.all())
	if metric(env, "ballet_gateway_lagging_closes_total") != 0 {
		t.Fatal("closed lagging within the catch-up limit")
	}

	// 250 more of 8 KB: too far behind to catch up (the sockets hold some), not to replay.
	paused(250, 8<<10)
	waitFor(t, "the replay after lagging", 30*time.Second, func() bool { return col.len() == 320 })
	checkExactlyOnce(t, col.seqs(), a.all())
	if metric(env, "ballet_gateway_lagging_closes_total") != 1 || len(resynced) != 0 {
		t.Fatalf("lagging closes %v, want 1, and no resync", metric(env, "ballet_gateway_lagging_closes_total"))
	}

	// 700 more: too far behind to replay.
	paused(700, 8<<10)
	var from int64
	select {
	case from = <-resynced:
	case <-time.After(30 * time.Second):
		t.Fatalf("no resync; lagging closes %v", metric(env, "ballet_gateway_lagging_closes_total"))
	}
	if metric(env, "ballet_gateway_lagging_closes_total") != 2 {
		t.Fatalf("lagging closes %v, want 2", metric(env, "ballet_gateway_lagging_closes_total"))
	}
	a.append(t, env, 20)
	all := a.all()
	var want []int64
	got := col.seqs()
	for _, s := range all {
		if s > from {
			want = append(want, s)
		}
	}
	waitFor(t, "the events after the resync", 30*time.Second, func() bool {
		got = col.seqs()
		return len(got) > 0 && got[len(got)-1] == all[len(all)-1]
	})
	time.Sleep(100 * time.Millisecond)
	got = col.seqs()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("events out of order or duplicated at %d: %d after %d", i, got[i], got[i-1])
		}
	}
	checkExactlyOnce(t, got[len(got)-len(want):], want)
	if sub.Err() != nil {
		t.Fatalf("subscription ended: %v", sub.Err())
	}
}

// Calls made while the client reconnects wait for the next connection.
func TestCallWaitsForReconnect(t *testing.T) {
	env := startEnv(t, false, gateway.Config{})
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	var st states
	c := dial(t, p.URL(), &client.Options{Token: (&minter{env: env, subject: "alice"}).Token, OnStateChange: st.record})
	p.Stop()
	waitFor(t, "the loss to be noticed", 30*time.Second, func() bool { return c.State() == client.StateReconnecting })
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Ping(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ping while away: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Ping(context.Background())
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	p.Start()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Close while reconnecting stops the attempts.
	p.Stop()
	waitFor(t, "the loss to be noticed", 30*time.Second, func() bool { return c.State() == client.StateReconnecting })
	c.Close()
	if c.State() != client.StateClosed {
		t.Fatalf("state %v", c.State())
	}
}
