package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/streams/pgtest"
)

// cluster is N `serve` processes over one database.
type cluster struct {
	t        *testing.T
	db       string
	iss      *auth.Issuer
	env      []string
	replicas []*replica
}

type replica struct {
	p     *proc
	addr  string // client port
	admin string // admin port
}

func newCluster(t *testing.T, n int, extraEnv ...string) *cluster {
	return newClusterOn(t, pgtest.URL(t), n, extraEnv...)
}

// newClusterOn is newCluster on the database db.
func newClusterOn(t *testing.T, db string, n int, extraEnv ...string) *cluster {
	c := &cluster{t: t, db: db, iss: authtest.NewIssuer(t)}
	c.env = append([]string{
		"BALLET_DATABASE_URL=" + c.db, "BALLET_OIDC_ISSUER=" + c.iss.URL(), "BALLET_OIDC_AUDIENCE=ballet",
		"BALLET_ADDR=127.0.0.1:0", "BALLET_ADMIN_ADDR=127.0.0.1:0", "BALLET_ADMIN_SUBJECTS=root",
	}, extraEnv...)
	c.run("migrate")
	c.run("admin", "project-create", "WEB", "Web site")
	c.run("admin", "grant", "WEB", "alice", "admin")
	c.run("admin", "grant", "WEB", "bob", "viewer")
	for i := 0; i < n; i++ {
		c.serve()
	}
	return c
}

// serve starts one more replica, with extraEnv beyond the cluster's, and returns it.
func (c *cluster) serve(extraEnv ...string) *replica {
	c.t.Helper()
	p := start(c.t, append(slices.Clone(c.env), extraEnv...), "serve")
	r := &replica{p: p, addr: p.waitLine(c.t, listenRe)}
	r.admin = adminRe.FindStringSubmatch(p.output())[1]
	c.replicas = append(c.replicas, r)
	return r
}

func (c *cluster) run(args ...string) {
	c.t.Helper()
	p := start(c.t, c.env, args...)
	if code := p.wait(c.t, 60*time.Second); code != 0 {
		c.t.Fatalf("%v: exit %d\n%s", args, code, p.output())
	}
}

func (c *cluster) token(subject string) string {
	return authtest.Mint(c.t, c.iss, subject, auth.TokenOptions{Audience: []string{"ballet"}})
}

// jsonClient is a bare JSON-codec connection to one replica.
type jsonClient struct {
	t  *testing.T
	ws *websocket.Conn
	id int
}

func (c *cluster) dialJSON(r *replica, subject string) *jsonClient {
	c.t.Helper()
	k := &jsonClient{t: c.t, ws: wsDial(c.t, "ws://"+r.addr+"/rpc", codec.JSON)}
	k.call("auth", map[string]string{"token": c.token(subject)})
	return k
}

func (k *jsonClient) call(method string, params any) map[string]any {
	k.t.Helper()
	k.id++
	return rpcCall(k.t, k.ws, k.id, method, params)
}

// events reads stream.event seqs until n have arrived (or a stream.closed).
func (k *jsonClient) events(n int) ([]int64, string) {
	k.t.Helper()
	var seqs []int64
	for len(seqs) < n {
		m := readJSON(k.t, k.ws)
		p, _ := m["params"].(map[string]any)
		switch m["method"] {
		case "stream.event":
			seqs = append(seqs, int64(p["seq"].(float64)))
		case "stream.closed":
			return seqs, fmt.Sprint(p["reason"])
		}
	}
	return seqs, ""
}

func projectSeqs(t *testing.T, db string, after int64) []int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT seq FROM events WHERE project_key = 'WEB' AND seq > $1 ORDER BY seq`, after)
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return seqs
}

func sameSeqs(t *testing.T, who string, got, want []int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", who, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: event %d is seq %d, want %d", who, i, got[i], want[i])
		}
	}
}

func restPost(t *testing.T, addr, token, path, body string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
	}
}

// TestThreeReplicasShareOneLog: events from plain SQL and from REST on any
// replica reach subscribers on every replica once and in order; a client
// resumes on another replica with from_seq; a revocation on one replica
// closes the subject's subscriptions on the others.
func TestThreeReplicasShareOneLog(t *testing.T) {
	c := newCluster(t, 3)
	a, b, cc := c.replicas[0], c.replicas[1], c.replicas[2]
	head := projectSeqs(t, c.db, 0)
	start := head[len(head)-1]
	var subs []*jsonClient
	for _, r := range c.replicas {
		k := c.dialJSON(r, "alice")
		k.call("stream.subscribe", map[string]any{"subscription": "w", "stream": "project:WEB"})
		subs = append(subs, k)
	}
	bobC := c.dialJSON(cc, "bob")
	bobC.call("stream.subscribe", map[string]any{"subscription": "b", "stream": "project:WEB"})

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tok := c.token("alice")
	for i := 0; i < 10; i++ {
		if _, err := conn.Exec(ctx, `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload)
			VALUES ('WEB', 'note.added', 'note', $1, NULL, 'service', 'importer', '{}')`, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		restPost(t, c.replicas[i%3].addr, tok, "/api/v1/projects/WEB/items", fmt.Sprintf(`{"title":"item %d"}`, i))
	}
	want := projectSeqs(t, c.db, start)
	if len(want) != 20 {
		t.Fatalf("%d events written, want 20", len(want))
	}
	for i, k := range subs {
		got, closed := k.events(len(want))
		if closed != "" {
			t.Fatalf("replica %d: closed %s", i, closed)
		}
		sameSeqs(t, fmt.Sprintf("replica %d", i), got, want)
	}
	got, _ := bobC.events(len(want))
	sameSeqs(t, "bob on replica 2", got, want)

	// Resume on another replica: the client on A read up to mid, then moves to C.
	mid := want[9]
	k := c.dialJSON(cc, "alice")
	k.call("stream.subscribe", map[string]any{"subscription": "w", "stream": "project:WEB", "from_seq": mid})
	got, _ = k.events(10)
	sameSeqs(t, "resumed on replica 2", got, want[10:])

	// Revoke bob through REST on replica A: his subscription on C closes.
	req, _ := http.NewRequest("DELETE", "http://"+a.addr+"/api/v1/projects/WEB/members/bob", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("revoke: %v %v", err, resp)
	}
	resp.Body.Close()
	if _, closed := bobC.events(1 << 20); closed != "forbidden" {
		t.Fatalf("bob's subscription on replica 2: closed %q, want forbidden", closed)
	}
	_ = b
}

// TestDrainAndFailover: SIGTERM turns /readyz unready, closes connections
// with 1001 spread over the drain window, and a Go client behind a "load
// balancer" resumes on the other replica with every event exactly once.
func TestDrainAndFailover(t *testing.T) {
	c := newCluster(t, 2, "BALLET_DRAIN_WINDOW=1s")
	first, second := c.replicas[0], c.replicas[1]
	// The load balancer: dial the first replica that accepts.
	var dialed sync.Map
	lb := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var last error
		for _, r := range c.replicas {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, r.addr)
			if err == nil {
				dialed.Store(r.addr, true)
				return conn, nil
			}
			last = err
		}
		return nil, last
	}}}
	tok := c.token("alice")
	cl, err := client.Dial(context.Background(), "ws://gateway.invalid/rpc", &client.Options{
		Token: client.StaticToken(tok), HTTPClient: lb, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start := projectSeqs(t, c.db, 0)
	sub, err := cl.Subscribe(context.Background(), "project:WEB", nil)
	if err != nil {
		t.Fatal(err)
	}
	// More connections on the first replica, so the drain has something to spread.
	var others []*jsonClient
	for i := 0; i < 4; i++ {
		others = append(others, c.dialJSON(first, "alice"))
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if _, err := conn.Exec(ctx, `INSERT INTO events (project_key, type, entity_type, entity_id, actor_kind, actor_subject)
				VALUES ('WEB', 'tick', 'clock', 'c', 'service', 'clock')`); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	// The readers time each close as it comes, however long the checks below take.
	closedAt := make([]time.Duration, len(others))
	t0 := time.Now()
	var rg sync.WaitGroup
	for i, k := range others {
		rg.Add(1)
		go func() {
			defer rg.Done()
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for {
				if _, _, err := k.ws.Read(rctx); err != nil {
					if code := websocket.CloseStatus(err); code != websocket.StatusGoingAway {
						t.Errorf("connection %d: close %v, want 1001", i, err)
					}
					closedAt[i] = time.Since(t0)
					return
				}
			}
		}()
	}
	if err := first.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Until the drain begins, or the replica has gone (then it was missed).
	sawUnready := false
	for deadline := time.Now().Add(30 * time.Second); !sawUnready && time.Now().Before(deadline); {
		resp, err := http.Get("http://" + first.admin + "/readyz")
		if err != nil {
			break
		}
		resp.Body.Close()
		sawUnready = resp.StatusCode == 503
		time.Sleep(10 * time.Millisecond)
	}
	if !sawUnready {
		t.Error("/readyz never answered 503 while draining")
	}
	rg.Wait()
	slices.Sort(closedAt)
	if code := first.p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("first replica exit %d:\n%s", code, first.p.output())
	}
	if spread := closedAt[len(closedAt)-1] - closedAt[0]; spread < 300*time.Millisecond {
		t.Errorf("closes spread over %v only; the drain window is 1s", spread)
	}
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	want := projectSeqs(t, c.db, start[len(start)-1])
	var got []int64
	timeout := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			got = append(got, ev.Seq)
		case <-timeout:
			t.Fatalf("after failover: %d of %d events", len(got), len(want))
		}
	}
	sameSeqs(t, "failover client", got, want)
	if _, ok := dialed.Load(second.addr); !ok {
		t.Fatal("the client never reached the second replica")
	}
}
