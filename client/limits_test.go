package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/gateway"
)

// The client takes its heartbeat interval from the auth result: an idle
// connection to a server with a short interval stays up, and a silent one
// is given up after three of the server's intervals. An explicit interval
// longer than the server's still sends often enough.
func TestHeartbeatFollowsServer(t *testing.T) {
	const iv = 100 * time.Millisecond
	for _, tc := range []struct {
		name string
		opt  time.Duration
	}{{"server's", 0}, {"explicit longer", time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			env := startEnv(t, false, gateway.Config{HeartbeatInterval: iv})
			p := startProxy(t, env.HTTP.Listener.Addr().String())
			var st states
			c := dial(t, p.URL(), &client.Options{
				Token: (&minter{env: env, subject: "alice"}).Token, HeartbeatInterval: tc.opt, OnStateChange: st.record,
			})
			if got := c.Limits().Heartbeat; got != iv {
				t.Fatalf("advertised heartbeat %v, want %v", got, iv)
			}
			time.Sleep(15 * iv)
			if n := st.count(client.StateReconnecting); n != 0 {
				t.Fatalf("the server timed the idle client out: %v", st.errs(client.StateReconnecting))
			}
			if n := metric(env, "ballet_gateway_connects_total"); n != 1 {
				t.Fatalf("connects %v, want 1", n)
			}
			p.Freeze()
			start := time.Now()
			waitFor(t, "a heartbeat timeout", 10*time.Second, func() bool {
				for _, err := range st.errs(client.StateReconnecting) {
					if errors.Is(err, client.ErrHeartbeatTimeout) {
						return true
					}
				}
				return false
			})
			// Three of the longer interval, and well before three of the
			// default 15 s.
			if d := time.Since(start); d > 3*max(iv, tc.opt)+2*time.Second {
				t.Fatalf("silence noticed after %v", d)
			}
			waitFor(t, "the reconnect", 10*time.Second, func() bool { return st.count(client.StateConnected) == 2 })
		})
	}
}

// A server that advertises no limits (an older one): nothing is enforced
// locally and the heartbeat is the option's, or 15 s.
func TestNoAdvertisedLimits(t *testing.T) {
	pp := startPlannerPeer(t)
	c := dial(t, pp.url(), &client.Options{Token: client.StaticToken("t")})
	if got := c.Limits(); got != (client.Limits{}) {
		t.Fatalf("limits %+v from a server without them", got)
	}
	ctx := context.Background()
	for range 5 {
		if _, err := c.PlannerWatch(ctx, "s", nil); err != nil {
			t.Fatal(err)
		}
	}
}
