package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/protocol"
)

// fromAddr is an HTTP client whose sockets come from ip, an address of the loopback range.
func fromAddr(ip net.IP) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// A loop of failed auths from one address: past its budget (BALLET_ADDR_RATE, 1 a second in
// bursts of 2 here) the upgrade is refused 429 before any token is verified, so verifications
// stay within the budget, while a client of another address authenticates.
func TestFailedAuthsAreRatedPerAddress(t *testing.T) {
	t.Parallel()
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{AddrRate: 1}})
	attacker := fromAddr(net.IPv4(127, 0, 0, 1))
	const tries = 30
	refused := 0
	start := time.Now()
	for range tries {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ws, res, err := websocket.Dial(ctx, env.URL, &websocket.DialOptions{HTTPClient: attacker,
			Subprotocols: []string{codec.NameJSON}})
		cancel()
		if err != nil {
			if res == nil || res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
				t.Fatalf("dial: %v (%v)", err, res)
			}
			refused++
			continue
		}
		k := newClient(t, ws, codec.JSON)
		if e := k.call("auth", map[string]string{"token": "not-a-token"}, nil); e == nil ||
			(e.Code != int(protocol.ErrUnauthenticated) && e.Code != int(protocol.ErrLimitExceeded)) {
			t.Fatalf("a bad token's auth: %v", e)
		}
		ws.CloseNow()
	}
	elapsed := time.Since(start)
	verified := metricValue(t, env.Server, "ballet_gateway_auth_failures_total")
	// A burst of 2 and 1 a second: each failure costs its upgrade and itself.
	if bound := 2 + elapsed.Seconds() + 1; verified > bound {
		t.Errorf("%v tokens verified in %v, want at most %.0f", verified, elapsed, bound)
	}
	if refused == 0 {
		t.Error("no upgrade refused")
	}
	if n, _ := labeledMetric(t, env.Server, "ballet_gateway_limit_rejections_total", "limit",
		"unauthenticated_requests_per_ip"); n < float64(refused) {
		t.Errorf("%v rejections counted, %d refused", n, refused)
	}
	t.Logf("%d tries in %v: %d refused, %v verified", tries, elapsed, refused, verified)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, env.URL, &websocket.DialOptions{HTTPClient: fromAddr(net.IPv4(127, 0, 0, 2)),
		Subprotocols: []string{codec.NameJSON}})
	if err != nil {
		t.Fatalf("a client of another address: %v", err)
	}
	newClient(t, ws, codec.JSON).mustCall("auth", map[string]string{"token": env.Token(t, "alice")}, nil)
}

// REST requests without a valid token from one address: past its budget they are answered
// 429 with Retry-After and the limit's problem, unverified; requests with a valid token from
// it spend nothing of it, and another address is served.
func TestUnauthenticatedRESTIsRatedPerAddress(t *testing.T) {
	t.Parallel()
	env := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, Config: gateway.Config{AddrRate: 1}})
	env.Project(t, "WEB", "alice", "viewer")
	get := func(c *http.Client, token string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, env.BaseURL+"/api/v1/projects/WEB/items", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	here, there := fromAddr(net.IPv4(127, 0, 0, 1)), fromAddr(net.IPv4(127, 0, 0, 2))
	token := env.Token(t, "alice")
	for i := range 10 { // far beyond the address's budget, were they counted
		if res := get(here, token); res.StatusCode != http.StatusOK {
			t.Fatalf("valid request %d: %d", i, res.StatusCode)
		}
	}
	statuses := map[int]int{}
	var last *http.Response
	for range 20 {
		last = get(here, "not-a-token")
		statuses[last.StatusCode]++
	}
	if statuses[http.StatusTooManyRequests] == 0 || statuses[http.StatusUnauthorized] > 2+2 {
		t.Fatalf("statuses %v: want a few 401s, then 429s", statuses)
	}
	var p struct {
		Status int    `json:"status"`
		Limit  string `json:"limit"`
		Max    int    `json:"max"`
	}
	if err := json.NewDecoder(last.Body).Decode(&p); err != nil || last.Header.Get("Retry-After") == "" ||
		last.Header.Get("Content-Type") != "application/problem+json" || p.Limit != "unauthenticated_requests_per_ip" || p.Max != 1 {
		t.Fatalf("the 429: %v %v %+v", err, last.Header, p)
	}
	if res := get(there, token); res.StatusCode != http.StatusOK {
		t.Fatalf("another address: %d", res.StatusCode)
	}
}

// Connections of one address opened within its budget: once one's auth has failed and spent
// what was left, the next auth from that address is refused -32029 and closed 4029 before its
// token is verified (1 a second here: it is sent well within that second).
func TestAuthRefusedBeforeVerificationOnceFailuresSpentTheBudget(t *testing.T) {
	t.Parallel()
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{AddrRate: 1}})
	c := fromAddr(net.IPv4(127, 0, 0, 3))
	var ks []*wsClient
	for range 2 { // the burst: both upgrades admitted
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ws, _, err := websocket.Dial(ctx, env.URL, &websocket.DialOptions{HTTPClient: c, Subprotocols: []string{codec.NameJSON}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, newClient(t, ws, codec.JSON))
	}
	if e := ks[0].call("auth", map[string]string{"token": "not-a-token"}, nil); e == nil || e.Code != int(protocol.ErrUnauthenticated) {
		t.Fatalf("a bad token: %v", e)
	}
	if e := ks[1].call("auth", map[string]string{"token": env.Token(t, "alice")}, nil); e == nil ||
		e.Code != int(protocol.ErrLimitExceeded) {
		t.Fatalf("an auth after the budget was spent: %v", e)
	}
	if code := ks[1].waitClose(30 * time.Second); code != gateway.StatusLimitExceeded {
		t.Errorf("closed %d, want 4029", code)
	}
	if n := metricValue(t, env.Server, "ballet_gateway_auth_failures_total"); n != 1 {
		t.Errorf("%v tokens verified, want 1", n)
	}
}
