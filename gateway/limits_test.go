package gateway_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// limitErr is the data of a -32029 error.
type limitErr struct {
	Limit        string `json:"limit"`
	Max          int    `json:"max"`
	RetryAfterMs *int64 `json:"retry_after_ms"`
}

func decodeLimit(t testing.TB, c codec.Codec, e *codec.Error) limitErr {
	t.Helper()
	if e == nil || e.Code != -32029 {
		t.Fatalf("got %+v, want error -32029", e)
	}
	var d limitErr
	if err := c.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("data of -32029 %q: %v", e.Data, err)
	}
	return d
}

func limitRejections(t testing.TB, srv *gateway.Server, limit string) float64 {
	t.Helper()
	v, ok := labeledMetric(t, srv, "ballet_gateway_limit_rejections_total", "limit", limit)
	if !ok {
		t.Fatalf("no ballet_gateway_limit_rejections_total{limit=%q}", limit)
	}
	return v
}

// TestAuthAdvertisesLimits: auth and auth.refresh advertise the configured limits; the
// planner's only where it runs, as the planner enforces them.
func TestAuthAdvertisesLimits(t *testing.T) {
	cfg := gateway.Config{
		MaxSubscriptions: 7, RequestRate: 33, MaxConnectionsPerSubject: 5, ReplayLimit: 321,
		ReadLimit: 64 << 10, HeartbeatInterval: 2 * time.Second, SubjectRequestRate: 44, ReplayRate: 55,
		ConnectionQueueBytes: 96 << 10,
	}
	want := map[string]int64{"subscriptions": 7, "requests_per_second": 33, "message_bytes": 64 << 10,
		"replay": 321, "connections_per_subject": 5, "heartbeat_ms": 2000,
		"subject_requests_per_second": 44, "replay_events_per_second": 55, "queued_bytes": 96 << 10}
	withPlanner := map[string]int64{"planner_message_bytes": 1234, "planner_turns": 3}
	maps.Copy(withPlanner, want)
	for _, tc := range []struct {
		name string
		opts *gatewaytest.Options
		want map[string]int64
	}{
		{"no_planner", &gatewaytest.Options{Config: cfg}, want},
		{"planner", &gatewaytest.Options{Config: cfg, Planner: provider.NewScripted(nil),
			PlannerOptions: planner.Options{MaxMessageBytes: 1234, TurnsPerSubject: 3}}, withPlanner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := gatewaytest.Start(t, tc.opts)
			forEachCodec(t, func(t *testing.T, c codec.Codec) {
				k := dial(t, env.URL, c)
				for _, method := range []string{"auth", "auth.refresh"} {
					var res struct {
						Subject string           `json:"subject"`
						Limits  map[string]int64 `json:"limits"`
					}
					k.mustCall(method, map[string]string{"token": env.Token(t, "alice")}, &res)
					if !maps.Equal(res.Limits, tc.want) {
						t.Fatalf("%s: limits %v, want %v", method, res.Limits, tc.want)
					}
				}
			})
		})
	}
}

func TestSubscriptionLimit(t *testing.T) {
	const max = 8
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{MaxSubscriptions: max, RequestRate: 10000, SubjectRequestRate: 100_000}})
	env.Project(t, "WEB", "alice", "viewer")
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := login(t, env, c, "alice")
		// A flood: many more subscribe requests than the limit, pipelined.
		ids := make([]int64, 0, 40*max)
		for i := range 40 * max {
			ids = append(ids, k.send("stream.subscribe", map[string]string{"subscription": fmt.Sprint("s", i), "stream": fmt.Sprint("item:WEB-", i+1)}))
		}
		ok, refused := 0, 0
		for _, id := range ids {
			if e := k.await(id, nil); e == nil {
				ok++
			} else {
				d := decodeLimit(t, c, e)
				if d.Limit != "subscriptions" || d.Max != max || d.RetryAfterMs != nil {
					t.Fatalf("data %+v", d)
				}
				refused++
			}
		}
		if ok != max || refused != 39*max {
			t.Fatalf("%d accepted, %d refused; want %d and %d", ok, refused, max, 39*max)
		}
		// Unsubscribing frees a place; the id namespace is shared with planner.watch.
		var found string
		for i := range 40 * max {
			id := fmt.Sprint("s", i)
			if k.call("stream.unsubscribe", map[string]string{"subscription": id}, nil) == nil {
				found = id
				break
			}
		}
		if found == "" {
			t.Fatal("no subscription to unsubscribe")
		}
		k.mustCall("stream.subscribe", map[string]string{"subscription": "again", "stream": "project:WEB"}, nil)
		decodeLimit(t, c, k.call("stream.subscribe", map[string]string{"subscription": "over", "stream": "item:WEB-0"}, nil))
		if n := limitRejections(t, env.Server, "subscriptions"); n < 39*max+1 {
			t.Fatalf("limit_rejections_total{limit=subscriptions} = %v", n)
		}
	})
}

func TestRequestRateLimit(t *testing.T) {
	const rate = 500
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{RequestRate: rate, SubjectRequestRate: 100 * rate}})
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := login(t, env, c, "alice")
		const n = 4000
		start := time.Now()
		ids := make([]int64, n)
		go func() {
			// Writes wait while the server holds the flood back.
			for i := range ids {
				ids[i] = k.send("system.ping", nil)
			}
		}()
		ok, refused := 0, 0
		var retry int64
		for range n {
			m := k.mustNext()
			if !m.IsResponse() {
				t.Fatalf("unexpected %+v", m)
			}
			if m.Error == nil {
				ok++
				continue
			}
			d := decodeLimit(t, c, m.Error)
			if d.Limit != "requests" || d.Max != rate || d.RetryAfterMs == nil || *d.RetryAfterMs < 1 || *d.RetryAfterMs > 1000/rate+1 {
				t.Fatalf("data %+v", d)
			}
			retry = *d.RetryAfterMs
			refused++
		}
		elapsed := time.Since(start)
		// The budget: a burst of twice the rate, then the rate.
		if most := 2*rate + int(elapsed.Seconds()*rate) + 1; ok > most {
			t.Fatalf("%d requests served in %v, at most %d allowed", ok, elapsed, most)
		}
		if ok < 2*rate {
			t.Fatalf("only %d requests served, the burst is %d", ok, 2*rate)
		}
		// Refusals have the same budget; past it the server reads no faster:
		// the flood is stretched out instead of costing the server more.
		if least := time.Duration((n - 4*rate) / (2 * rate) * 9 / 10 * int64(time.Second)); elapsed < least {
			t.Fatalf("%d frames handled in %v; the budget allows no less than %v", n, elapsed, least)
		}
		// The connection stays usable: after the advertised wait, a request is served.
		time.Sleep(time.Duration(retry)*time.Millisecond + 10*time.Millisecond)
		k.mustCall("system.ping", nil, nil)
		t.Logf("%s: %d served, %d refused in %v", c.Name(), ok, refused, elapsed)
		if n := limitRejections(t, env.Server, "requests"); n < float64(refused) {
			t.Fatalf("limit_rejections_total{limit=requests} = %v, %d refused here", n, refused)
		}
	})
}

func TestConnectionsPerSubjectLimit(t *testing.T) {
	const max = 20
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{MaxConnectionsPerSubject: max}})
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		subject := "bob-" + c.Name()
		// A flood of connections of one subject, authenticating at once.
		const n = 3 * max
		var (
			mu       sync.Mutex
			admitted []*wsClient
			refused  int
			wg       sync.WaitGroup
		)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := dial(t, env.URL, c)
				e := k.call("auth", map[string]string{"token": env.Token(t, subject)}, nil)
				mu.Lock()
				defer mu.Unlock()
				if e == nil {
					admitted = append(admitted, k)
					return
				}
				d := decodeLimit(t, c, e)
				if d.Limit != "connections_per_subject" || d.Max != max {
					t.Errorf("data %+v", d)
				}
				if code := k.waitClose(5 * time.Second); code != gateway.StatusLimitExceeded {
					t.Errorf("close %d, want 4029", code)
				}
				refused++
			}()
		}
		wg.Wait()
		if len(admitted) != max || refused != n-max {
			t.Fatalf("%d admitted, %d refused; want %d and %d", len(admitted), refused, max, n-max)
		}
		// Another subject is not affected.
		login(t, env, c, "carol-"+c.Name())
		// Closing one frees its place.
		admitted[0].ws.Close(websocket.StatusNormalClosure, "")
		deadline := time.Now().Add(30 * time.Second)
		for {
			k := dial(t, env.URL, c)
			e := k.call("auth", map[string]string{"token": env.Token(t, subject)}, nil)
			if e == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no place after a close: %+v", e)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestMaxConnections(t *testing.T) {
	const max = 30
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{MaxConnections: max}})
	// Unauthenticated connections count: a flood of handshakes.
	var (
		mu    sync.Mutex
		open  []*websocket.Conn
		full  int
		wg    sync.WaitGroup
		other []error
	)
	for range 3 * max {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ws, resp, err := websocket.Dial(ctx, env.URL, &websocket.DialOptions{Subprotocols: []string{codec.NameJSON}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				open = append(open, ws)
			case resp != nil && resp.StatusCode == http.StatusServiceUnavailable:
				if resp.Header.Get("Retry-After") == "" {
					other = append(other, fmt.Errorf("503 without Retry-After"))
				}
				full++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, ws := range open {
			ws.CloseNow()
		}
	})
	if len(other) > 0 {
		t.Fatal(other)
	}
	if len(open) != max || full != 2*max {
		t.Fatalf("%d open, %d refused; want %d and %d", len(open), full, max, 2*max)
	}
	if n := limitRejections(t, env.Server, "connections"); n != 2*max {
		t.Fatalf("limit_rejections_total{limit=connections} = %v", n)
	}
	resp, err := http.Get(env.BaseURL + "/rpc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("plain GET at the limit: %d %v", resp.StatusCode, resp.Header)
	}
	// A closed connection frees its place.
	open[0].Close(websocket.StatusNormalClosure, "")
	open = open[1:]
	deadline := time.Now().Add(30 * time.Second)
	for {
		ws, err := dialRaw(t, env.URL, []string{codec.NameJSON}, nil)
		if err == nil {
			open = append(open, ws)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no place after a close: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMethodNotFoundQuotesAShortName(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := login(t, env, c, "alice")
		long := strings.Repeat("é", 100<<10)
		e := k.wantError(long, nil, -32601)
		if n := len([]rune(e.Message)); n > 100 {
			t.Fatalf("message of %d characters: %.80q", n, e.Message)
		}
		if !strings.Contains(e.Message, strings.Repeat("é", 64)+"…") {
			t.Fatalf("message %q", e.Message)
		}
		e = k.wantError("no.such", nil, -32601)
		if e.Message != "method no.such not found" {
			t.Fatalf("message %q", e.Message)
		}
	})
}

func TestFirstMessageMustBeAuth(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	msgpackFrames := map[string][]byte{
		"garbage":             {0xc1, 0xff, 0x00},
		"array (batch)":       {0x91, 0x80},
		"not a map":           {0xa3, 'a', 'b', 'c'},
		"string id":           mp(t, map[string]any{"jsonrpc": "2.0", "id": "x", "method": "auth", "params": map[string]string{"token": "t"}}),
		"auth as notify":      mp(t, map[string]any{"jsonrpc": "2.0", "method": "auth", "params": map[string]string{"token": "t"}}),
		"other method":        mp(t, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "system.ping"}),
		"other notification":  mp(t, map[string]any{"jsonrpc": "2.0", "method": "$/heartbeat", "params": map[string]int{"time": 1}}),
		"response":            mp(t, map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{}}),
		"token not a string":  mp(t, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "auth", "params": map[string]int{"token": 5}}),
		"params not a map":    mp(t, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "auth", "params": []int{1}}),
		"declared 2^32-1 map": {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'x'},
	}
	jsonFrames := map[string]string{
		"garbage":            `}{`,
		"truncated":          `{"jsonrpc":"2.0","id":1,"method":"auth"`,
		"array (batch)":      `[{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":"t"}}]`,
		"empty batch":        `[]`,
		"not an object":      `"auth"`,
		"string id":          `{"jsonrpc":"2.0","id":"1","method":"auth","params":{"token":"t"}}`,
		"fractional id":      `{"jsonrpc":"2.0","id":1.5,"method":"auth","params":{"token":"t"}}`,
		"no jsonrpc":         `{"id":1,"method":"auth","params":{"token":"t"}}`,
		"auth as notify":     `{"jsonrpc":"2.0","method":"auth","params":{"token":"t"}}`,
		"other method":       `{"jsonrpc":"2.0","id":1,"method":"system.ping"}`,
		"unknown method":     `{"jsonrpc":"2.0","id":1,"method":"no.such"}`,
		"other notification": `{"jsonrpc":"2.0","method":"$/heartbeat","params":{"time":1}}`,
		"response":           `{"jsonrpc":"2.0","id":1,"result":{}}`,
		"token not a string": `{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":5}}`,
		"params not a map":   `{"jsonrpc":"2.0","id":1,"method":"auth","params":[1]}`,
		"nested 30000 deep":  `{"jsonrpc":"2.0","id":1,"method":"auth","params":` + strings.Repeat("[", 30000) + strings.Repeat("]", 30000) + `}`, // within the first message's 64 KiB
	}
	run := func(t *testing.T, c codec.Codec, frame []byte) {
		k := dial(t, env.URL, c)
		k.writeRaw(frame)
		// A well-formed auth pipelined behind it must not be served (the
		// write fails when the server has closed already).
		auth, _ := c.Encode(nil, &codec.Message{ID: 9, HasID: true, Method: "auth", Params: mp(t, map[string]string{"token": env.Token(t, "alice")})})
		if !c.Binary() {
			auth, _ = c.Encode(nil, &codec.Message{ID: 9, HasID: true, Method: "auth", Params: []byte(`{"token":"` + env.Token(t, "alice") + `"}`)})
		}
		_ = k.ws.Write(context.Background(), map[bool]websocket.MessageType{true: websocket.MessageBinary, false: websocket.MessageText}[c.Binary()], auth)
		for { // until the server closes the connection
			m, err := k.next(30 * time.Second)
			if err != nil {
				break
			}
			if m.IsResponse() && m.Error == nil {
				t.Fatalf("a message after the wrong first one was served: %+v", m)
			}
		}
		if code := websocket.CloseStatus(k.err); code != gateway.StatusUnauthenticated {
			t.Fatalf("close %d (%v), want 4001", code, k.err)
		}
	}
	t.Run(codec.NameMsgPack, func(t *testing.T) {
		t.Parallel()
		for name, f := range msgpackFrames {
			t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) { t.Parallel(); run(t, codec.MsgPack, f) })
		}
	})
	t.Run(codec.NameJSON, func(t *testing.T) {
		t.Parallel()
		for name, f := range jsonFrames {
			t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) { t.Parallel(); run(t, codec.JSON, []byte(f)) })
		}
	})
}

func mp(t testing.TB, v any) []byte {
	t.Helper()
	b, err := codec.MsgPack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPlannerWatchesCountAsSubscriptions: stream subscriptions and planner
// watches share the connection's limit, as they share its id namespace.
func TestPlannerWatchesCountAsSubscriptions(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(plannerScript))
	if err != nil {
		t.Fatal(err)
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{Planner: provider.NewScripted(script), Config: gateway.Config{MaxSubscriptions: 3}})
	env.Project(t, "WEB", "alice", "member")
	session := createSession(t, env, env.Token(t, "alice"))
	other := createSession(t, env, env.Token(t, "alice")) // a session is watched once per connection
	third := createSession(t, env, env.Token(t, "alice"))
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		k := login(t, env, c, "alice")
		k.mustCall("planner.watch", map[string]any{"subscription": "p1", "session": session}, nil)
		k.mustCall("stream.subscribe", map[string]any{"subscription": "s1", "stream": "project:WEB"}, nil)
		k.mustCall("planner.watch", map[string]any{"subscription": "p2", "session": other}, nil)
		for _, call := range []struct {
			method string
			params map[string]any
		}{
			{"planner.watch", map[string]any{"subscription": "p3", "session": third}},
			{"stream.subscribe", map[string]any{"subscription": "s2", "stream": "project:WEB", "types": []string{"item.*"}}},
		} {
			if d := decodeLimit(t, c, k.call(call.method, call.params, nil)); d.Limit != "subscriptions" || d.Max != 3 {
				t.Fatalf("%s: data %+v", call.method, d)
			}
		}
		k.mustCall("stream.unsubscribe", map[string]any{"subscription": "p1"}, nil)
		k.mustCall("planner.watch", map[string]any{"subscription": "p3", "session": third}, nil)
	})
}

// TestRESTBodyTrickleIsCut: a REST client that sends its body a byte at a
// time cannot hold the connection past RESTTimeout.
func TestRESTBodyTrickleIsCut(t *testing.T) {
	const restTimeout = 300 * time.Millisecond
	// Slack for a loaded machine; a connection the trickle kept open would stay for ever.
	const bound = restTimeout + 10*time.Second
	env := gatewaytest.Start(t, &gatewaytest.Options{Tracker: true, RESTTimeout: restTimeout})
	env.Project(t, "WEB", "alice", "member")
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.BaseURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/projects/WEB/items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", env.Token(t, "alice"))
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		// The server answers or closes; either ends this read loop.
		_, err := io.Copy(io.Discard, conn)
		done <- err
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			if el := time.Since(start); el > bound {
				t.Fatalf("held for %v", el)
			}
			return
		case <-tick.C:
			if el := time.Since(start); el > bound {
				t.Fatalf("the trickling client still holds the connection after %v", el)
			}
			_, _ = conn.Write([]byte(" "))
		}
	}
}
