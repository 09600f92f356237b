package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/rpc"
)

func rejections(env *gatewaytest.Env, limit string) float64 {
	mfs, err := env.Server.Metrics().Registry.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ballet_gateway_limit_rejections_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "limit" && l.GetValue() == limit {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// The client takes its heartbeat interval from the auth result: an idle
// connection to a server with a short interval stays up, and a silent one
// is given up after three of the server's intervals. An explicit interval
// longer than the server's still sends often enough.
func TestHeartbeatFollowsServer(t *testing.T) {
	// Long enough that a loaded machine's pauses of the client's heartbeats or the server's
	// do not add up to three intervals.
	const iv = 500 * time.Millisecond
	for _, tc := range []struct {
		name string
		opt  time.Duration
	}{{"server's", 0}, {"explicit longer", 2 * iv}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := startEnv(t, false, gateway.Config{HeartbeatInterval: iv})
			p := startProxy(t, env.HTTP.Listener.Addr().String())
			var st states
			c := dial(t, p.URL(), &client.Options{
				Token: (&minter{env: env, subject: "alice"}).Token, HeartbeatInterval: tc.opt, OnStateChange: st.record,
			})
			if got := c.Limits().Heartbeat; got != iv {
				t.Fatalf("advertised heartbeat %v, want %v", got, iv)
			}
			time.Sleep(8 * iv)
			if n := st.count(client.StateReconnecting); n != 0 {
				t.Fatalf("the server timed the idle client out: %v", st.errs(client.StateReconnecting))
			}
			if n := metric(env, "ballet_gateway_connects_total"); n != 1 {
				t.Fatalf("connects %v, want 1", n)
			}
			p.Freeze()
			start := time.Now()
			waitFor(t, "a heartbeat timeout", 30*time.Second, func() bool {
				for _, err := range st.errs(client.StateReconnecting) {
					if errors.Is(err, client.ErrHeartbeatTimeout) {
						return true
					}
				}
				return false
			})
			// Three of the longer interval (and 10 s for a loaded machine), well
			// before three of the default 15 s.
			if d := time.Since(start); d > 3*max(iv, tc.opt)+10*time.Second {
				t.Fatalf("silence noticed after %v", d)
			}
			waitFor(t, "the reconnect", 30*time.Second, func() bool { return st.count(client.StateConnected) == 2 })
		})
	}
}

// Subscriptions and planner watches beyond the advertised limit fail
// locally with a *LimitError, without a request; the server's own -32029
// becomes the same error.
func TestSubscriptionLimit(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(`{"rules": []}`))
	if err != nil {
		t.Fatal(err)
	}
	env := gatewaytest.Start(t, &gatewaytest.Options{
		Config: gateway.Config{MaxSubscriptions: 3}, Planner: provider.NewScripted(script),
	})
	env.Project(t, "WEB", "alice", "member")
	session := createSession(t, env, "alice")
	c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
	if got := c.Limits().Subscriptions; got != 3 {
		t.Fatalf("advertised subscriptions %d, want 3", got)
	}
	ctx := context.Background()
	a, err := c.Subscribe(ctx, "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PlannerWatch(ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	// Other filters: a connection follows a stream with one filter once.
	if _, err := c.Subscribe(ctx, "project:WEB", &client.SubscribeOptions{Types: []string{"item.*"}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Subscribe(ctx, "project:WEB", &client.SubscribeOptions{Types: []string{"project.*"}})
	if le := limitErr(t, err); le.Limit != client.LimitSubscriptions || le.Max != 3 {
		t.Fatalf("subscribe beyond the limit: %+v", le)
	}
	_, err = c.PlannerWatch(ctx, session, nil)
	if le := limitErr(t, err); le.Limit != client.LimitSubscriptions {
		t.Fatalf("watch beyond the limit: %+v", le)
	}
	if n := rejections(env, "subscriptions"); n != 0 {
		t.Fatalf("the server refused %v subscriptions: the client sent them", n)
	}

	// The server's answer, to a subscribe the client does not count.
	err = c.Call(ctx, "stream.subscribe", map[string]any{"subscription": "raw", "stream": "project:WEB", "types": []string{"raw"}}, nil)
	if le := limitErr(t, err); le.Limit != client.LimitSubscriptions || le.Max != 3 || le.RetryAfter != 0 {
		t.Fatalf("the server's -32029: %+v", le)
	}
	if n := rejections(env, "subscriptions"); n != 1 {
		t.Fatalf("server refusals %v, want 1", n)
	}

	if err := a.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(ctx, "project:WEB", nil); err != nil {
		t.Fatalf("subscribe after an unsubscribe: %v", err)
	}
}

func createSession(t testing.TB, env *gatewaytest.Env, subject string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", env.BaseURL+"/api/v1/projects/WEB/planner/sessions", strings.NewReader(`{"title":"t"}`))
	req.Header.Set("Authorization", "Bearer "+env.Token(t, subject))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sess struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != 201 || json.Unmarshal(body, &sess) != nil {
		t.Fatalf("create session: %d %s", resp.StatusCode, body)
	}
	return sess.ID
}

// Requests refused for the rate are sent again after retry_after_ms; with
// retries off, or no time left in ctx, the *LimitError says when to retry.
func TestRequestRateRetries(t *testing.T) {
	const rate = 5 // bursts of 10
	env := startEnv(t, false, gateway.Config{RequestRate: rate})
	ctx := context.Background()

	c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
	if got := c.Limits().RequestsPerSecond; got != rate {
		t.Fatalf("advertised rate %d", got)
	}
	for i := range 3 * rate {
		if _, err := c.Ping(ctx); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
	if n := rejections(env, "requests"); n == 0 {
		t.Fatal("the server refused nothing: the test did not exceed the rate")
	}

	if le := pingUntilRefused(t, env, 4*rate); le.Limit != client.LimitRequests || le.Max != rate || le.RetryAfter <= 0 || le.RetryAfter > time.Second {
		t.Fatalf("refusal: %+v", le)
	}
}

// pingUntilRefused pings, on a new connection of alice that does not retry,
// until the server refuses a ping (at most n of them), and returns the
// refusal.
func pingUntilRefused(t *testing.T, env *gatewaytest.Env, n int) *client.LimitError {
	t.Helper()
	none := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token, RateLimitRetries: -1})
	var err error
	for i := 0; err == nil && i < n; i++ {
		_, err = none.Ping(context.Background())
	}
	return limitErr(t, err)
}

// A retry that would outlast the call's deadline is not begun: the call
// fails with the *LimitError at once instead of with the deadline.
func TestRequestRateRetryWithinDeadline(t *testing.T) {
	env := startEnv(t, false, gateway.Config{RequestRate: 1}) // a token a second, bursts of 2
	c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
	// Each call may wait up to 900 ms, nearly as long as a token takes. A refusal whose
	// retry cannot fit is returned before the deadline; one whose retry fits is sent again,
	// and on a loaded machine the deadline may pass meanwhile: that is no failure.
	const wait = 900 * time.Millisecond
	var le *client.LimitError
	for i := 0; le == nil && i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		start := time.Now()
		_, err := c.Ping(ctx)
		late := ctx.Err() != nil
		cancel()
		switch {
		case err == nil, errors.Is(err, context.DeadlineExceeded):
		case errors.As(err, &le):
			if late {
				t.Fatalf("waited out the deadline (%v) for a retry that could not fit: %v", time.Since(start), err)
			}
		default:
			t.Fatal(err)
		}
	}
	if le == nil {
		t.Fatal("no call was refused at once with a retry that could not fit")
	}
	if le.Limit != client.LimitRequests || le.RetryAfter <= 0 || le.RetryAfter > time.Second+time.Millisecond {
		t.Fatalf("refusal: %+v", le)
	}
}

// After a reconnect, the client's resubscribes beyond the request budget
// wait and are sent again rather than ending their subscriptions, even
// with RateLimitRetries off.
func TestResubscribeWaitsForRate(t *testing.T) {
	t.Parallel()
	// A new connection's budget is 4 requests, refilled at 2 a second: the 15 resubscribes of
	// a reconnect would have to take more than 5 s to stay within it, which even a loaded
	// machine does not make them take (at 5 a second and bursts of 10, a second sufficed).
	const rate, subs = 2, 15
	env := startEnv(t, true, gateway.Config{RequestRate: rate})
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	var st states
	c := dial(t, p.URL(), &client.Options{
		Token: (&minter{env: env, subject: "alice"}).Token, RateLimitRetries: -1, OnStateChange: st.record,
	})
	ctx := context.Background()
	var all []*client.Subscription
	for len(all) < subs {
		// Filters selecting every event, one each: a connection follows a stream with one
		// filter once.
		s, err := c.Subscribe(ctx, "project:WEB", &client.SubscribeOptions{Types: []string{"*", fmt.Sprint("n", len(all))}})
		if err != nil {
			le := limitErr(t, err)
			time.Sleep(le.RetryAfter)
			continue
		}
		all = append(all, s)
	}
	before := rejections(env, "requests")
	p.Drop()
	waitFor(t, "the reconnect", 30*time.Second, func() bool { return st.count(client.StateConnected) == 2 })
	waitFor(t, "every resubscribe", 30*time.Second, func() bool {
		for _, s := range all {
			if err := s.Err(); err != nil {
				t.Fatalf("%s ended: %v", s.ID(), err)
			}
		}
		return subscriptions(env) == subs
	})
	if n := rejections(env, "requests"); n <= before {
		t.Fatal("the server refused no resubscribe: the test did not exceed the rate")
	}
	var a appender
	a.append(t, env, 1)
	for _, s := range all {
		if ev := recv(t, s); ev.Seq != a.all()[0] {
			t.Fatalf("%s: seq %d", s.ID(), ev.Seq)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("%s ended: %v", s.ID(), err)
		}
	}
}

// A subject at its connection limit: Dial fails with the *LimitError, and
// a client whose reconnects are refused (-32029, close 4029) waits near
// MaxBackoff between attempts, logs why, and gets in once a place is free.
func TestSubjectConnectionLimitBacksOff(t *testing.T) {
	t.Parallel()
	const maxBackoff = time.Second
	env := startEnv(t, true, gateway.Config{MaxConnectionsPerSubject: 2})
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	m := &minter{env: env, subject: "alice"}
	var logs logBuffer
	var mu sync.Mutex
	var refused []time.Time
	var connected atomic.Int64
	c := dial(t, p.URL(), &client.Options{
		Token: m.Token, MinBackoff: 20 * time.Millisecond, MaxBackoff: maxBackoff, Logger: logs.logger(),
		OnStateChange: func(s client.State, err error) {
			var le *client.LimitError
			switch {
			case s == client.StateConnected:
				connected.Add(1)
			case errors.As(err, &le) && le.Limit == client.LimitConnectionsPerSubject:
				mu.Lock()
				refused = append(refused, time.Now())
				mu.Unlock()
			}
		},
	})
	sub, err := c.Subscribe(context.Background(), "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	dial(t, env.URL, &client.Options{Token: m.Token})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = client.Dial(ctx, env.URL, &client.Options{Token: m.Token})
	if le := limitErr(t, err); le.Limit != client.LimitConnectionsPerSubject || le.Max != 2 {
		t.Fatalf("third connection: %+v", le)
	}

	// c loses its connection and another client takes its place.
	p.Stop()
	var other *client.Client
	waitFor(t, "the free place", 30*time.Second, func() bool {
		o, err := client.Dial(ctx, env.URL, &client.Options{Token: m.Token})
		if err != nil {
			return false
		}
		other = o
		return true
	})
	t.Cleanup(func() { other.Close() })
	p.Start()
	waitFor(t, "three refused reconnects", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refused) >= 3
	})
	mu.Lock()
	for i := 1; i < len(refused); i++ {
		if gap := refused[i].Sub(refused[i-1]); gap < maxBackoff/2 {
			t.Errorf("attempt %d came %v after a refusal, want at least %v", i, gap, maxBackoff/2)
		}
	}
	mu.Unlock()
	if !strings.Contains(logs.String(), "too many connections of this subject") {
		t.Errorf("nothing logged about the limit:\n%s", logs.String())
	}

	other.Close()
	waitFor(t, "the reconnect", 30*time.Second, func() bool { return connected.Load() == 2 })
	var a appender
	a.append(t, env, 1)
	if ev := recv(t, sub); ev.Seq != a.all()[0] {
		t.Fatalf("seq %d", ev.Seq)
	}
}

// A replica at its connection limit answers the handshake with 503 and
// Retry-After: Dial's error says so, and a reconnecting client waits that
// long before its next attempt.
func TestHandshake503(t *testing.T) {
	t.Parallel()
	t.Run("replica full", func(t *testing.T) {
		env := startEnv(t, false, gateway.Config{MaxConnections: 1})
		m := &minter{env: env, subject: "alice"}
		dial(t, env.URL, &client.Options{Token: m.Token})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := client.Dial(ctx, env.URL, &client.Options{Token: m.Token})
		var he *client.HandshakeError
		if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable || he.RetryAfter != 5*time.Second {
			t.Fatalf("dial a full replica: %v (%+v)", err, he)
		}
	})
	t.Run("reconnect waits", func(t *testing.T) {
		env := startEnv(t, false, gateway.Config{})
		// A front that refuses handshakes while busy, as a full replica does.
		var busy atomic.Bool
		var mu sync.Mutex
		var refused []time.Time
		h := env.Server.Handler()
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if busy.Load() {
				mu.Lock()
				refused = append(refused, time.Now())
				mu.Unlock()
				w.Header().Set("Retry-After", "1")
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(front.Close)
		p := startProxy(t, front.Listener.Addr().String())
		var st states
		c := dial(t, p.URL(), &client.Options{Token: (&minter{env: env, subject: "alice"}).Token, OnStateChange: st.record})
		busy.Store(true)
		p.Drop()
		waitFor(t, "two refused attempts", 30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(refused) >= 2
		})
		busy.Store(false)
		mu.Lock()
		gap := refused[1].Sub(refused[0])
		mu.Unlock()
		if gap < time.Second {
			t.Fatalf("attempt %v after a 503 with Retry-After: 1", gap)
		}
		var he *client.HandshakeError
		if errs := st.errs(client.StateReconnecting); len(errs) < 2 || !errors.As(errs[1], &he) || he.RetryAfter != time.Second {
			t.Fatalf("reported: %v", errs)
		}
		waitFor(t, "the reconnect", 30*time.Second, func() bool { return c.State() == client.StateConnected })
	})
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

// A subject's connections share its request budget: requests refused for
// it (limit "subject_requests") are sent again like those refused for the
// connection's, and the client advertises the subject's budgets.
func TestSubjectRateRetries(t *testing.T) {
	t.Parallel()
	const rate = 5 // bursts of 10, for both connections together
	env := startEnv(t, false, gateway.Config{RequestRate: 1000, SubjectRequestRate: rate, ReplayRate: 77})
	ctx := context.Background()
	var cs []*client.Client
	for range 2 {
		cs = append(cs, dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token, RateLimitRetries: 100}))
	}
	if l := cs[0].Limits(); l.SubjectRequestsPerSecond != rate || l.ReplayEventsPerSecond != 77 {
		t.Fatalf("advertised %+v", l)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*3*rate)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 * rate {
				if _, err := c.Ping(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("ping: %v", err)
	}
	if n := rejections(env, "subject_requests"); n == 0 {
		t.Fatal("the server refused nothing: the test did not exceed the subject's rate")
	}
	if le := pingUntilRefused(t, env, 4*rate); le.Limit != client.LimitSubjectRequests || le.Max != rate || le.RetryAfter <= 0 || le.RetryAfter > time.Second {
		t.Fatalf("refusal: %+v", le)
	}
}

// After a reconnect, resubscribes refused for the subject's replay budget
// wait and are sent again: every subscription resumes with what it missed,
// once.
func TestResubscribeWaitsForReplayBudget(t *testing.T) {
	t.Parallel()
	// 200 events to replay, with a budget of 60 and 10 a second: the four resubscribes would
	// have to take 14 s to fit without a refusal, however loaded the machine.
	const subs, missed = 4, 50
	env := startEnv(t, true, gateway.Config{ReplayRate: 10, ReplayLimit: 60})
	p := startProxy(t, env.HTTP.Listener.Addr().String())
	var st states
	c := dial(t, p.URL(), &client.Options{
		Token: (&minter{env: env, subject: "alice"}).Token, RateLimitRetries: -1, OnStateChange: st.record,
	})
	ctx := context.Background()
	var all []*client.Subscription
	for i := range subs {
		// Filters selecting every event, one each: a connection follows a stream with one
		// filter once.
		s, err := c.Subscribe(ctx, "project:WEB", &client.SubscribeOptions{Types: []string{"*", fmt.Sprint("n", i)}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
	}
	waitFor(t, "the subscriptions", 10*time.Second, func() bool { return subscriptions(env) == subs })
	p.Stop() // the events are missed, and replayed after the reconnect
	var a appender
	a.append(t, env, missed)
	p.Start()
	waitFor(t, "the reconnect", 20*time.Second, func() bool { return st.count(client.StateConnected) == 2 })
	for _, s := range all {
		for i, want := range a.all() {
			if ev := recv(t, s); ev.Seq != want {
				t.Fatalf("%s: event %d has seq %d, want %d", s.ID(), i, ev.Seq, want)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("%s ended: %v", s.ID(), err)
		}
	}
	if n := rejections(env, "replay"); n == 0 {
		t.Fatal("the server refused no resubscribe: the test did not exceed the replay budget")
	}
}

// A planner message longer, in bytes of UTF-8, than the advertised limit is
// refused locally with a *LimitError that matches the server's -32602,
// without a request; one at the limit is sent. The planner's limits are
// advertised where it runs, and the connection's queue bound everywhere.
func TestPlannerMessageLimit(t *testing.T) {
	script, err := provider.ParseScript(strings.NewReader(`{"rules": []}`))
	if err != nil {
		t.Fatal(err)
	}
	const max = 64
	env := gatewaytest.Start(t, &gatewaytest.Options{
		Config:  gateway.Config{ConnectionQueueBytes: 1 << 20},
		Planner: provider.NewScripted(script), PlannerOptions: planner.Options{MaxMessageBytes: max, TurnsPerSubject: 2},
	})
	env.Project(t, "WEB", "alice", "member")
	session := createSession(t, env, "alice")
	c := dial(t, env.URL, &client.Options{Token: (&minter{env: env, subject: "alice"}).Token})
	if l := c.Limits(); l.PlannerMessageBytes != max || l.PlannerTurns != 2 || l.QueuedBytes != 1<<20 {
		t.Fatalf("advertised %+v", l)
	}
	ctx := context.Background()
	long := strings.Repeat("é", max/2+1) // fewer characters than the limit, more bytes
	_, err = c.PlannerSend(ctx, session, long, nil)
	var le *client.LimitError
	if !errors.As(err, &le) || le.Limit != client.LimitPlannerMessageBytes || le.Max != max || le.RetryAfter != 0 {
		t.Fatalf("send beyond the limit: %v (%+v)", err, le)
	}
	if !errors.Is(err, rpc.ErrInvalidParams) || rpc.Code(err) != rpc.ErrInvalidParams.Code {
		t.Fatalf("%v does not match rpc.ErrInvalidParams", err)
	}
	sent := func() float64 { return metric(env, "ballet_gateway_messages_received_total", "method", "planner.send") }
	if n := sent(); n != 0 {
		t.Fatalf("the server received %v planner.send: the client sent it", n)
	}
	// The server refuses it alike.
	err = c.Call(ctx, "planner.send", map[string]string{"session": session, "text": long}, nil)
	if !errors.Is(err, rpc.ErrInvalidParams) {
		t.Fatalf("the server's answer to a long text: %v", err)
	}
	if _, err := c.PlannerSend(ctx, session, strings.Repeat("é", max/2), nil); err != nil {
		t.Fatalf("send at the limit: %v", err)
	}
	if n := sent(); n != 2 {
		t.Fatalf("the server received %v planner.send, want 2", n)
	}
	tok := env.Token(t, "alice")
	if got := humanMessages(t, env, tok, session); len(got) != 1 {
		t.Fatalf("stored human messages %q, want the one at the limit", got)
	}
}
