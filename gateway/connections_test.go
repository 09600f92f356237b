package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/planner/provider"
)

// listing is GET /api/v1/admin/connections with query, answered 200 to root.
func listing(t *testing.T, env *gatewaytest.Env, query string) operator.Listing {
	t.Helper()
	var l operator.Listing
	body := wantREST(t, env, "GET", "/api/v1/admin/connections"+query, env.Token(t, "root"), http.StatusOK)
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return l
}

// TestConnectionsListing: the listing shows each authenticated connection as its session has
// it (subject, client id, codec, subscriptions, planner watches, token expiry, peer), on both
// stores, under the replica's id; ?subject= keeps one subject's; closed ones are gone.
func TestConnectionsListing(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "postgres"}[pg], func(t *testing.T) {
			t.Parallel()
			env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: pg, AdminSubjects: []string{"root"},
				Planner: provider.NewScripted(provider.DefaultScript())})
			env.Project(t, "WEB", "alice", "member", "robot", "viewer")
			alice := login(t, env, codec.MsgPack, "alice")
			alice.mustCall("stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"}, nil)
			alice.mustCall("stream.subscribe", map[string]any{"subscription": "i", "stream": "project:WEB", "types": []string{"item.created"}}, nil)
			alice.mustCall("planner.watch", map[string]any{"subscription": "p", "session": createSession(t, env, env.Token(t, "alice"))}, nil)
			robot := dial(t, env.URL, codec.JSON)
			tok := authtest.Mint(t, env.Issuer, "robot", auth.TokenOptions{Audience: []string{gatewaytest.Audience}, ClientID: "ci"})
			robot.mustCall("auth", map[string]string{"token": tok}, nil)
			dial(t, env.URL, codec.JSON) // not authenticated: not listed

			l := listing(t, env, "")
			if len(l.Replicas) != 1 || l.Replicas[0] != (operator.ReplicaAnswer{Replica: env.Replica, Answered: true}) || l.Truncated {
				t.Fatalf("replicas %+v, truncated %v", l.Replicas, l.Truncated)
			}
			if len(l.Connections) != 2 {
				t.Fatalf("%d connections, want 2: %+v", len(l.Connections), l.Connections)
			}
			a, r := l.Connections[0], l.Connections[1]
			if a.Subject != "alice" || a.Codec != "msgpack" || a.Subscriptions != 2 || a.Watches != 1 || a.ClientID != "" ||
				r.Subject != "robot" || r.Codec != "json" || r.Subscriptions != 0 || r.Watches != 0 || r.ClientID != "ci" {
				t.Fatalf("connections %+v", l.Connections)
			}
			for _, c := range l.Connections {
				if c.Replica != env.Replica || len(c.ID) != 16 || !strings.HasPrefix(c.RemoteAddr, "127.0.0.1:") ||
					time.Since(c.ConnectedAt) > time.Minute || time.Until(c.ExpiresAt) < 30*time.Minute {
					t.Fatalf("connection %+v", c)
				}
			}
			if only := listing(t, env, "?subject=robot"); len(only.Connections) != 1 || only.Connections[0].ID != r.ID {
				t.Fatalf("?subject=robot: %+v", only.Connections)
			}
			if none := listing(t, env, "?subject=nobody"); len(none.Connections) != 0 || none.Connections == nil {
				t.Fatalf("?subject=nobody: %+v", none.Connections)
			}
			alice.hangUp()
			waitUntil(t, func() bool { return len(listing(t, env, "?subject=alice").Connections) == 0 })
			// A replica counts its answer once it is written, which may be after the asker has it.
			waitUntil(t, func() bool {
				v, _ := labeledMetric(t, env.Server, "ballet_gateway_admin_listings_total", "outcome", operator.ListingAnswered)
				return v >= 4
			})
		})
	}
}

// TestConnectionsBounds: a listing shows at most its limit (1000 by default, at most 10000)
// and says when it left some out; a bad limit or subject is refused; only administrators
// may list.
func TestConnectionsBounds(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, AdminSubjects: []string{"root"}})
	for range 3 {
		login(t, env, codec.JSON, "alice")
	}
	if conns, more := env.Server.Connections("", 2); len(conns) != 2 || !more {
		t.Fatalf("Connections(2): %d, more %v", len(conns), more)
	}
	if conns, more := env.Server.Connections("alice", 3); len(conns) != 3 || more {
		t.Fatalf("Connections(3): %d, more %v", len(conns), more)
	}
	if l := listing(t, env, "?limit=2"); len(l.Connections) != 2 || !l.Truncated {
		t.Fatalf("?limit=2: %d, truncated %v", len(l.Connections), l.Truncated)
	}
	if l := listing(t, env, "?limit=10000"); len(l.Connections) != 3 || l.Truncated {
		t.Fatalf("?limit=10000: %d, truncated %v", len(l.Connections), l.Truncated)
	}
	root := env.Token(t, "root")
	for _, q := range []string{"?limit=0", "?limit=10001", "?limit=x", "?limit="} {
		if body := wantREST(t, env, "GET", "/api/v1/admin/connections"+q, root, http.StatusBadRequest); !strings.Contains(body, "10000") {
			t.Fatalf("%s: %s", q, body)
		}
	}
	for _, q := range []string{"?subject=", "?subject=" + strings.Repeat("a", 256)} {
		wantREST(t, env, "GET", "/api/v1/admin/connections"+q, root, http.StatusUnprocessableEntity)
	}
	body := wantREST(t, env, "GET", "/api/v1/admin/connections", env.Token(t, "alice"), http.StatusForbidden)
	if !strings.Contains(body, "BALLET_ADMIN_SUBJECTS") {
		t.Fatalf("403: %s", body)
	}
	wantREST(t, env, "GET", "/api/v1/admin/connections", "", http.StatusUnauthorized)
}

// waitUntil polls cond for up to 5 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
	}
}

// Behind a trusted proxy (BALLET_TRUSTED_PROXIES) the listing shows the client's address, the
// right-most X-Forwarded-For entry that is not a proxy, rather than the proxy's socket; a
// connection straight from an untrusted peer shows that peer.
func TestConnectionsListingBehindProxy(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, AdminSubjects: []string{"root"}, Config: gateway.Config{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, DrainWindow: 10 * time.Millisecond,
	}})
	ws, err := dialRaw(t, env.URL, []string{codec.JSON.Name()}, http.Header{"X-Forwarded-For": {"198.51.100.7, 127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	proxied := newClient(t, ws, codec.JSON)
	proxied.mustCall("auth", map[string]string{"token": env.Token(t, "alice")}, nil)
	if l := listing(t, env, "?subject=alice"); len(l.Connections) != 1 || l.Connections[0].RemoteAddr != "198.51.100.7" {
		t.Fatalf("behind the proxy: %+v, want remote_addr 198.51.100.7", l.Connections)
	}
	// The same header from a peer that is not a trusted proxy is not believed.
	d := &websocket.DialOptions{Subprotocols: []string{codec.JSON.Name()}, HTTPHeader: http.Header{"X-Forwarded-For": {"198.51.100.8"}},
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	direct, _, err := websocket.Dial(ctx, env.URL, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.CloseNow() })
	newClient(t, direct, codec.JSON).mustCall("auth", map[string]string{"token": env.Token(t, "bob")}, nil)
	if l := listing(t, env, "?subject=bob"); len(l.Connections) != 1 || !strings.HasPrefix(l.Connections[0].RemoteAddr, "127.0.0.2:") {
		t.Fatalf("from an untrusted peer: %+v, want its own address", l.Connections)
	}
}
