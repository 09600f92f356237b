package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/streams/pgtest"
)

// TestServeTailsAStandby: two `serve` replicas tail and replay from a streaming standby while
// a writer keeps inserting on the primary. The standby is stopped and started again mid-stream:
// /readyz fails once it has been down longer than BALLET_TAIL_MAX_LAG and recovers with it, and
// every subscriber on either replica gets every event once and in order.
func TestServeTailsAStandby(t *testing.T) {
	pair := pgtest.NewPair(t, nil)
	db := pgtest.StandbyOn(t, pair)
	c := newClusterOn(t, db.PrimaryURL, 2, "BALLET_TAIL_DATABASE_URL="+db.StandbyURL, "BALLET_TAIL_MAX_LAG=1s")
	for _, r := range c.replicas {
		if code, body := adminGet(t, r, "/readyz"); code != 200 {
			t.Fatalf("/readyz %d %s", code, body)
		}
		if _, body := adminGet(t, r, "/metrics"); !strings.Contains(body, "ballet_gateway_tail_lag_seconds 0\n") {
			t.Fatalf("/metrics has no zero ballet_gateway_tail_lag_seconds:\n%s", grepLines(body, "tail_lag"))
		}
		if _, body := adminGet(t, r, "/metrics"); !strings.Contains(body, "ballet_gateway_tail_max_lag_seconds 1\n") {
			t.Fatalf("/metrics has no ballet_gateway_tail_max_lag_seconds of BALLET_TAIL_MAX_LAG=1s:\n%s", grepLines(body, "tail_max_lag"))
		}
	}
	start := projectSeqs(t, c.db, 0)
	var subs []*jsonClient
	for _, r := range c.replicas {
		for range 2 {
			k := c.dialJSON(r, "alice")
			k.call("stream.subscribe", map[string]any{"subscription": "w", "stream": "project:WEB", "from_seq": start[len(start)-1]})
			subs = append(subs, k)
		}
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var written atomic.Int64
	wg.Go(func() {
		for !stop.Load() {
			if _, err := conn.Exec(ctx, `INSERT INTO events (project_key, type, entity_type, entity_id, actor_kind, actor_subject)
				VALUES ('WEB', 'tick', 'clock', 'c', 'service', 'clock')`); err != nil {
				t.Error(err)
				return
			}
			written.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	})
	// Writes before, while and after the standby is down: counted, not timed, since a loaded
	// machine writes fewer in the same time.
	writes := func(what string, n int64) {
		t.Helper()
		from := written.Load()
		deadline := time.Now().Add(time.Minute)
		for written.Load() < from+n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d writes %s", written.Load()-from, n, what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	writes("before the standby stops", 20)
	pair.StopStandby()
	waitReady(t, c.replicas[0], 503, "the standby (BALLET_TAIL_DATABASE_URL) has not answered")
	writes("while the standby is down", 50)
	if err := pair.StartStandby(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.replicas {
		waitReady(t, r, 200, "ready")
	}
	writes("after the standby is back", 20)
	stop.Store(true)
	wg.Wait()
	want := projectSeqs(t, c.db, start[len(start)-1])
	if len(want) < 50 {
		t.Fatalf("only %d events written", len(want))
	}
	for i, k := range subs {
		got, closed := k.events(len(want))
		if closed != "" {
			t.Fatalf("subscriber %d: closed %s", i, closed)
		}
		sameSeqs(t, "subscriber", got, want)
	}
}

// TestServeTailConfigErrors: a bad BALLET_TAIL_DATABASE_URL or BALLET_TAIL_MAX_LAG stops serve
// with a message naming it.
func TestServeTailConfigErrors(t *testing.T) {
	env := []string{"BALLET_DATABASE_URL=" + pgtest.URL(t), "BALLET_OIDC_ISSUER=http://127.0.0.1:1", "BALLET_OIDC_AUDIENCE=ballet",
		"BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0"}
	for _, tc := range []struct{ env, want string }{
		{"BALLET_TAIL_MAX_LAG=soon", `BALLET_TAIL_MAX_LAG="soon"`},
		{"BALLET_TAIL_MAX_LAG=-1s", `BALLET_TAIL_MAX_LAG="-1s"`},
		{"BALLET_TAIL_DATABASE_URL=postgres://%zz", "BALLET_TAIL_DATABASE_URL: not a valid Postgres connection string"},
		{"BALLET_TAIL_DATABASE_URL=postgres://postgres@127.0.0.1:1/x?connect_timeout=5", "BALLET_TAIL_DATABASE_URL: connect to the standby"},
	} {
		p := start(t, append([]string{tc.env}, env...), "serve", "--migrate")
		if code := p.wait(t, 60*time.Second); code != 1 || !strings.Contains(p.output(), tc.want) {
			t.Errorf("%s: exit %d, want 1 and %q:\n%s", tc.env, code, tc.want, p.output())
		}
	}
}

func adminGet(t *testing.T, r *replica, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReady waits until the replica's /readyz answers code with a body containing want.
func waitReady(t *testing.T, r *replica, code int, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, body := adminGet(t, r, "/readyz")
		if got == code && strings.Contains(body, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz answers %d %q, want %d %q", got, body, code, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
