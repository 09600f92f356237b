package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

var codecs = []codec.Codec{codec.MsgPack, codec.JSON}

// carriers are the ways a connection goes, for the tests that run over each: a WebSocket
// with each codec, and HTTP.
var carriers = []struct {
	name      string
	codec     codec.Codec
	transport client.Transport
}{
	{"msgpack", codec.MsgPack, client.TransportWebSocket},
	{"json", codec.JSON, client.TransportWebSocket},
	{"http", nil, client.TransportHTTP},
}

func codecName(c codec.Codec) string {
	if c.Binary() {
		return "msgpack"
	}
	return "json"
}

// minter is a token source that mints a fresh token per call and counts
// the calls.
type minter struct {
	env     *gatewaytest.Env
	t       testing.TB
	subject string
	ttl     time.Duration
	calls   atomic.Int64
}

func (m *minter) Token(context.Context) (string, error) {
	m.calls.Add(1)
	return m.env.Issuer.Mint(m.subject, auth.TokenOptions{Audience: []string{gatewaytest.Audience}, TTL: m.ttl})
}

func mint(t testing.TB, env *gatewaytest.Env, subject string, ttl time.Duration) string {
	return authtest.Mint(t, env.Issuer, subject, auth.TokenOptions{Audience: []string{gatewaytest.Audience}, TTL: ttl})
}

// mintExpired mints a token of subject that expired an hour ago.
func mintExpired(t testing.TB, env *gatewaytest.Env, subject string) string {
	return authtest.Mint(t, env.Issuer, subject, auth.TokenOptions{Audience: []string{gatewaytest.Audience},
		IssuedAt: time.Now().Add(-2 * time.Hour), TTL: time.Hour})
}

// states records a client's state changes.
type states struct {
	mu  sync.Mutex
	log []stateChange
}

type stateChange struct {
	state client.State
	err   error
}

func (s *states) record(st client.State, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, stateChange{st, err})
}

func (s *states) count(st client.State) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.log {
		if c.state == st {
			n++
		}
	}
	return n
}

func (s *states) errs(st client.State) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []error
	for _, c := range s.log {
		if c.state == st && c.err != nil {
			out = append(out, c.err)
		}
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dial connects with fast reconnects and closes the client when the test ends.
func dial(t testing.TB, url string, o *client.Options) *client.Client {
	t.Helper()
	if o.MinBackoff == 0 {
		o.MinBackoff = 20 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 200 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, o)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// startEnv starts a gateway of the test's own, with project WEB (alice admin, bob viewer).
// Tests that spend their time waiting (on token lifetimes, rates, backoffs, retry hints) and
// share nothing but such an env run in parallel with each other.
func startEnv(t testing.TB, pg bool, cfg gateway.Config) *gatewaytest.Env {
	t.Helper()
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: pg, Config: cfg})
	env.Project(t, "WEB", "alice", "admin", "bob", "viewer")
	return env
}

// tick is the test event number n on project WEB.
func tick(n int) streams.NewEvent {
	return streams.NewEvent{
		ProjectKey: "WEB", Type: "test.tick", EntityType: "item", EntityID: fmt.Sprintf("id-%d", n),
		EntityKey: fmt.Sprintf("WEB-%d", n), ActorKind: "system", ActorSubject: "test",
		Payload: []byte(fmt.Sprintf(`{"n":%d}`, n)),
	}
}

// appender appends tick events and records their seqs.
type appender struct {
	mu   sync.Mutex
	seqs []int64
	next int
}

func (a *appender) append(t testing.TB, env *gatewaytest.Env, count int) {
	t.Helper()
	a.appendPadded(t, env, count, 0)
}

// appendPadded is append with a payload of about pad bytes more per event.
func (a *appender) appendPadded(t testing.TB, env *gatewaytest.Env, count, pad int) {
	t.Helper()
	evs := make([]streams.NewEvent, count)
	a.mu.Lock()
	for i := range evs {
		evs[i] = tick(a.next)
		if pad > 0 {
			evs[i].Payload = []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, a.next, strings.Repeat("p", pad)))
		}
		a.next++
	}
	a.mu.Unlock()
	last, err := env.Store.Append(context.Background(), evs...)
	if err != nil {
		t.Errorf("append: %v", err)
		return
	}
	a.mu.Lock()
	for i := range evs {
		a.seqs = append(a.seqs, last-int64(count-1-i))
	}
	a.mu.Unlock()
}

func (a *appender) all() []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int64(nil), a.seqs...)
}

// collector reads a subscription's test.tick events.
type collector struct {
	mu     sync.Mutex
	events []client.Event
	log    []string // events and markers, in the order observed
	done   chan struct{}
}

func collect(sub *client.Subscription) *collector {
	c := &collector{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ev := range sub.Events() {
			if ev.Type != "test.tick" {
				continue
			}
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.log = append(c.log, fmt.Sprintf("event %d", ev.Seq))
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *collector) mark(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, s)
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events)
}

func (c *collector) seqs() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int64, len(c.events))
	for i, e := range c.events {
		out[i] = e.Seq
	}
	return out
}

// checkExactlyOnce asserts that got is want: every event once, in order.
func checkExactlyOnce(t testing.TB, got, want []int64) {
	t.Helper()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("events out of order or duplicated at %d: %d after %d", i, got[i], got[i-1])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d (missing %v)", len(got), len(want), missing(got, want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: seq %d, want %d", i, got[i], want[i])
		}
	}
}

func missing(got, want []int64) []int64 {
	have := map[int64]bool{}
	for _, s := range got {
		have[s] = true
	}
	var out []int64
	for _, s := range want {
		if !have[s] {
			out = append(out, s)
		}
	}
	return out
}

func payloadN(t testing.TB, ev client.Event) int {
	t.Helper()
	var p struct{ N int }
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		t.Fatalf("payload %s: %v", ev.Payload, err)
	}
	return p.N
}

// limitErr returns err's *client.LimitError, failing the test when there
// is none.
func limitErr(t testing.TB, err error) *client.LimitError {
	t.Helper()
	var le *client.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("%v: not a *client.LimitError", err)
	}
	if !errors.Is(err, protocol.ErrLimitExceeded) || rpc.Code(err) != int(protocol.ErrLimitExceeded) {
		t.Fatalf("%v does not match protocol.ErrLimitExceeded", err)
	}
	return le
}

// logBuffer collects a client's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }
