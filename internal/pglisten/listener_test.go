package pglisten_test

import (
	"context"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/internal/pglisten"
	"github.com/ballet/gateway/streams/pgtest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// env is a fresh database with a connection of its own for notifying and inspecting.
type env struct {
	url   string
	admin *pgx.Conn
}

func newEnv(t *testing.T) *env {
	t.Helper()
	u := pgtest.URL(t)
	admin, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	return &env{url: u, admin: admin}
}

func (e *env) config(t *testing.T, connString string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// inbox collects what a Listener reports.
type inbox struct {
	notes      chan *pgconn.Notification
	reconnects chan struct{}
}

func (in *inbox) options() *pglisten.Options {
	return &pglisten.Options{
		OnNotify:    func(n *pgconn.Notification) { in.notes <- n },
		OnReconnect: func() { in.reconnects <- struct{}{} },
	}
}

func newInbox() *inbox {
	return &inbox{notes: make(chan *pgconn.Notification, 100), reconnects: make(chan struct{}, 10)}
}

func (e *env) open(t *testing.T, channels []string, opts *pglisten.Options) *pglisten.Listener {
	t.Helper()
	l, err := pglisten.Open(t.Context(), e.config(t, e.url), channels, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func (e *env) notify(t *testing.T, channel, payload string) {
	t.Helper()
	if _, err := e.admin.Exec(t.Context(), "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		t.Fatal(err)
	}
}

// next returns the next notification, failing after a generous wait.
func (in *inbox) next(t *testing.T) *pgconn.Notification {
	t.Helper()
	select {
	case n := <-in.notes:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no notification within 30s")
		return nil
	}
}

func TestNotificationsArrive(t *testing.T) {
	e := newEnv(t)
	in := newInbox()
	l := e.open(t, []string{"one", "Two words"}, in.options())
	if l.PID() == 0 {
		t.Fatal("no pid after Open")
	}
	e.notify(t, "elsewhere", "not for us")
	e.notify(t, "one", "first")
	e.notify(t, "Two words", "second")
	for _, want := range [][2]string{{"one", "first"}, {"Two words", "second"}} {
		n := in.next(t)
		if n.Channel != want[0] || n.Payload != want[1] {
			t.Fatalf("notification %s %q, want %s %q", n.Channel, n.Payload, want[0], want[1])
		}
	}
}

func TestReconnectListensAgainAndReports(t *testing.T) {
	e := newEnv(t)
	in := newInbox()
	l := e.open(t, []string{"events"}, in.options())
	pid := l.PID()
	var ok bool
	if err := e.admin.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
	select {
	case <-in.reconnects:
	case <-time.After(time.Minute):
		t.Fatal("no reconnect reported")
	}
	if np := l.PID(); np == 0 || np == pid {
		t.Fatalf("pid %d after the reconnect (was %d)", np, pid)
	}
	e.notify(t, "events", "after")
	if n := in.next(t); n.Payload != "after" {
		t.Fatalf("notification %q after the reconnect", n.Payload)
	}
	select {
	case <-in.reconnects:
		t.Fatal("a second reconnect reported")
	default:
	}
}

func TestCloseEndsEverything(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	l, err := pglisten.Open(t.Context(), e.config(t, e.url), []string{"events"}, &pglisten.Options{
		OnNotify: func(*pgconn.Notification) { calls.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	pid := l.PID()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.PID() != 0 {
		t.Fatalf("PID after Close = %d", l.PID())
	}
	leaktest.Check(t, 30*time.Second)
	deadline := time.Now().Add(time.Minute)
	for {
		var n int
		if err := e.admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listening connection outlived Close")
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.notify(t, "events", "too late")
	time.Sleep(100 * time.Millisecond)
	if calls.Load() != 0 {
		t.Fatal("a notification was handed on after Close")
	}
}

func TestApplicationName(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, connString string
		opts             *pglisten.Options
		want             string
	}{
		{"default", e.url, nil, pglisten.DefaultApplicationName},
		{"role", e.url, &pglisten.Options{ApplicationName: "ballet-gateway-planner-bus"}, "ballet-gateway-planner-bus"},
		{"operator's", withParam(t, e.url, "application_name", "ops-gateway"), &pglisten.Options{ApplicationName: "ballet-gateway-planner-bus"}, "ops-gateway"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := pglisten.Open(t.Context(), e.config(t, c.connString), []string{"events"}, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var got string
			if err := e.admin.QueryRow(t.Context(), "SELECT application_name FROM pg_stat_activity WHERE pid = $1", l.PID()).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("application_name %q, want %q", got, c.want)
			}
		})
	}
}

func TestOpenFails(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, "postgres://postgres@127.0.0.1:1/nope?sslmode=disable&connect_timeout=5")
	if l, err := pglisten.Open(t.Context(), cfg, []string{"events"}, nil); err == nil {
		l.Close()
		t.Fatal("Open succeeded without a server")
	}
	if l, err := pglisten.Open(t.Context(), e.config(t, e.url), nil, nil); err == nil {
		l.Close()
		t.Fatal("Open succeeded without a channel")
	}
	leaktest.Check(t, 30*time.Second)
}

// withParam adds key=value to a connection string, a URL or keyword/value.
func withParam(t *testing.T, connString, key, value string) string {
	t.Helper()
	if !strings.HasPrefix(connString, "postgres://") && !strings.HasPrefix(connString, "postgresql://") {
		return connString + " " + key + "=" + value
	}
	u, err := url.Parse(connString)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}
