package tracker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/auth/authtest"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
	"github.com/ballet/gateway/tracker/pgstore"
	"github.com/ballet/gateway/tracker/trackertest"
)

// startGateway runs a full gateway on Postgres with the tracker's REST API mounted.
func startGateway(t *testing.T, replayLimit int) (*gatewaytest.Env, *restEnv) {
	t.Helper()
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: gateway.Config{
		ReplayLimit: replayLimit,
		DrainWindow: 50 * time.Millisecond, // connections left at the end close at once
	}})
	pool, err := pgxpool.New(context.Background(), env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svc := tracker.NewService(pgstore.New(pool), &tracker.Options{AdminSubjects: []string{"root"}})
	env.SetAPI(tracker.NewHandler(svc, authtest.NewVerifier(t, env.Issuer, gatewaytest.Audience), nil))
	return env, &restEnv{t: t, url: env.BaseURL, iss: env.Issuer, log: env.Store, svc: svc, http: env.HTTP.Client()}
}

// recipeClient follows the realtime API's client recipe for project WEB.
type recipeClient struct {
	t       *testing.T
	env     *gatewaytest.Env
	api     *restEnv
	subject string
	conn    *rpcClient
	sub     string // the current subscription
	n       int    // subscriptions made
	last    int64  // last seq received on the current subscription
	replica *trackertest.Replica
	applied int // events applied in total
	// query is the first page's parameters ("" for the default page), and between runs
	// after each page of the snapshot but the last.
	query   string
	between func(page int)
}

// start is steps 1 and 2: subscribe without from_seq, then load the snapshot page by page.
func (c *recipeClient) start() {
	c.t.Helper()
	c.n++
	c.sub = fmt.Sprint("s", c.n)
	head, e := c.conn.subscribe(c.sub, "project:WEB", nil)
	if e != nil {
		c.t.Fatalf("subscribe: %d %s", e.Code, e.Message)
	}
	c.last = head
	pages := c.api.listPages(c.subject, "WEB", c.query, c.between)
	if *pages[0].Seq < head {
		c.t.Fatalf("snapshot seq %d is behind the subscription's %d", *pages[0].Seq, head)
	}
	c.replica = trackertest.NewPagedReplica(itemLists(pages))
}

// resume is step 4: a new connection, subscribed from the last seq.
func (c *recipeClient) resume() *codec.Error {
	c.t.Helper()
	c.conn = dialRPC(c.t, c.env, c.subject)
	c.n++
	c.sub = fmt.Sprint("s", c.n)
	from := c.replica.Seq
	if _, e := c.conn.subscribe(c.sub, "project:WEB", &from); e != nil {
		return e
	}
	c.last = from
	return nil
}

// applyNext is step 3 for one event: no duplicates, no gaps (every event of this test's
// database is in project WEB), payloads that fit the replica.
// It returns false when no notice came within timeout.
func (c *recipeClient) applyNext(timeout time.Duration) bool {
	c.t.Helper()
	sub, ev, closed, err := c.conn.nextNotice(timeout)
	if err == errTimeout {
		return false
	}
	if err != nil {
		c.t.Fatalf("after seq %d: %v", c.replica.Seq, err)
	}
	if closed != nil || sub != c.sub {
		c.t.Fatalf("unexpected notice on %s: closed %+v", sub, closed)
	}
	if ev.Seq <= c.last {
		c.t.Fatalf("event %d received again (last %d)", ev.Seq, c.last)
	}
	c.last = ev.Seq
	if ev.Seq > c.replica.Seq+1 {
		c.t.Fatalf("gap: event %d after %d", ev.Seq, c.replica.Seq)
	}
	if ev.Seq > c.replica.Seq {
		c.applied++
	}
	if err := c.replica.Apply(ev); err != nil {
		c.t.Fatal(err)
	}
	return true
}

// drainTo applies events until the replica has reached seq.
func (c *recipeClient) drainTo(seq int64) {
	c.t.Helper()
	for c.replica.Seq < seq {
		if !c.applyNext(15 * time.Second) {
			c.t.Fatalf("no event after %d in 15s, want up to %d", c.replica.Seq, seq)
		}
	}
}

// converge checks the replica against a fresh snapshot, once writes have stopped.
func (c *recipeClient) converge() {
	c.t.Helper()
	head := c.api.head()
	c.drainTo(head)
	pages := c.api.listPages(c.subject, "WEB", "", nil)
	for _, p := range pages {
		if *p.Seq != head {
			c.t.Fatalf("a page at seq %d, head %d", *p.Seq, head)
		}
	}
	if c.replica.Seq != head {
		c.t.Fatalf("replica at %d, head %d", c.replica.Seq, head)
	}
	var items []tracker.Item
	for _, p := range pages {
		items = append(items, p.Items...)
	}
	if diff := c.replica.Diff(items); diff != "" {
		c.t.Fatalf("the client did not converge to the server's state:\n%s", diff)
	}
	if len(items) == 0 {
		c.t.Fatal("nothing to compare: no items")
	}
}

// writers make concurrent REST writes until done() or Stop.
type writers struct {
	wg       sync.WaitGroup
	stop     chan struct{}
	finished atomic.Int32
	ops      atomic.Int64
}

func startWriters(t *testing.T, e *restEnv, seed uint64, subjects []string, done func() bool) *writers {
	w := &writers{stop: make(chan struct{})}
	for i, sub := range subjects {
		w.wg.Go(func() {
			defer w.finished.Add(1)
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for {
				select {
				case <-w.stop:
					return
				default:
				}
				if done() {
					return
				}
				if err := restWrite(e, rng, sub); err != nil {
					t.Error(err)
					return
				}
				w.ops.Add(1)
			}
		})
	}
	return w
}

func (w *writers) running() bool { return int(w.finished.Load()) == 0 }

func (w *writers) wait() {
	close(w.stop)
	w.wg.Wait()
}

func jsonBody(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// restWrite makes one random write to project WEB over REST. Outcomes that concurrent writers
// cause (404, 409, 412, 422 for a self dependency) are fine; anything else is an error.
func restWrite(e *restEnv, rng *rand.Rand, subject string) error {
	r, err := e.send("GET", "/api/v1/projects/WEB/items", subject, "")
	if err != nil {
		return err
	}
	var snap struct {
		Items []tracker.Item `json:"items"`
	}
	if err := json.Unmarshal(r.body, &snap); err != nil {
		return fmt.Errorf("snapshot %d %s: %v", r.status, r.body, err)
	}
	items := snap.Items
	pick := func() tracker.Item { return items[rng.IntN(len(items))] }
	states := []string{tracker.StateBacklog, tracker.StateReady, tracker.StateInProgress, tracker.StateDone}
	var method, path, body string
	var headers []string
	switch op := rng.IntN(10); {
	case op < 3 || len(items) < 4:
		method, path = "POST", "/api/v1/projects/WEB/items"
		body = jsonBody(map[string]string{"title": fmt.Sprint("item ", rng.IntN(1000)), "description": fmt.Sprint("about ", rng.IntN(9))})
	case op == 3:
		method, path, body = "PATCH", "/api/v1/items/"+pick().Key, jsonBody(map[string]string{"title": fmt.Sprint("title ", rng.IntN(1000))})
	case op == 4:
		it := pick()
		method, path = "PATCH", "/api/v1/items/"+it.Key
		body = jsonBody(map[string]string{"title": fmt.Sprint("t", rng.IntN(1000)), "state": states[rng.IntN(4)]})
		headers = []string{"If-Match", fmt.Sprintf("%q", fmt.Sprint(it.Version))}
	case op == 5:
		method, path = "PATCH", "/api/v1/items/"+pick().Key
		body = jsonBody(map[string]string{"state": states[rng.IntN(4)], "description": fmt.Sprint("d", rng.IntN(9))})
	case op < 8:
		method, path = "PUT", "/api/v1/items/"+pick().Key+"/dependencies/"+pick().Key
	case op == 8:
		it := pick()
		if len(it.BlockedBy) == 0 {
			return nil
		}
		method, path = "DELETE", "/api/v1/items/"+it.Key+"/dependencies/"+url.PathEscape(it.BlockedBy[rng.IntN(len(it.BlockedBy))])
	default:
		if len(items) < 8 {
			return nil
		}
		it := pick()
		method, path, headers = "DELETE", "/api/v1/items/"+it.Key, []string{"If-Match", fmt.Sprint(it.Version)}
	}
	r, err = e.send(method, path, subject, body, headers...)
	if err != nil {
		return err
	}
	switch r.status {
	case 200, 201, 204, 404, 409, 412:
		return nil
	case 422:
		if method == "PUT" {
			return nil // a self dependency
		}
	}
	return fmt.Errorf("%s %s %s: %d %s", method, path, body, r.status, r.body)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClientRecipe follows the client recipe over a real WebSocket (MessagePack) and real
// Postgres while other clients write concurrently over REST: live events, a dropped
// connection resumed with from_seq, and a resync (-32010) recovered by starting over. Each
// time the client's copy must converge to exactly the server's snapshot.
func TestClientRecipe(t *testing.T) {
	const replayLimit = 300
	env, e := startGateway(t, replayLimit)
	e.must(201, "POST", "/api/v1/projects", "root", `{"key":"WEB","name":"Web"}`)
	for _, m := range [][2]string{{"alice", "member"}, {"bob", "member"}, {"carol", "member"}, {"vic", "viewer"}} {
		e.must(200, "PUT", "/api/v1/projects/WEB/members/"+m[0], "root", `{"role":"`+m[1]+`"}`)
	}
	for i := range 6 {
		e.must(201, "POST", "/api/v1/projects/WEB/items", "alice", fmt.Sprintf(`{"title":"seed %d"}`, i))
	}
	headNow := func() int64 {
		h, err := e.log.Head(context.Background())
		if err != nil {
			return 1 << 62 // stops the writers; the test fails elsewhere
		}
		return h
	}
	writersSubjects := []string{"alice", "bob", "carol"}
	c := &recipeClient{t: t, env: env, api: e, subject: "vic"}
	c.conn = dialRPC(t, env, "vic")

	// Steps 1–3 while others write; then the connection drops and writes go on.
	c.start()
	phase := headNow()
	w := startWriters(t, e, 1, writersSubjects, func() bool { return headNow() >= phase+200 })
	for c.applied < 30 && w.running() {
		c.applyNext(100 * time.Millisecond)
	}
	c.conn.close()
	dropped := c.replica.Seq
	waitUntil(t, "writes after the drop", func() bool { return headNow() >= dropped+30 || !w.running() })
	if missed := headNow() - dropped; missed == 0 {
		t.Fatal("nothing was written while the client was disconnected")
	}
	// Step 4: resubscribe with from_seq on a new connection, while the writes go on.
	if err := c.resume(); err != nil {
		t.Fatalf("resume from %d (head %d): %d %s", dropped, headNow(), err.Code, err.Message)
	}
	for w.running() {
		c.applyNext(100 * time.Millisecond)
	}
	w.wait()
	c.converge()
	t.Logf("live and resumed: %d writes, %d events applied", w.ops.Load(), c.applied)

	// More events than the replay limit while disconnected: -32010, then start over.
	c.conn.close()
	dropped = c.replica.Seq
	w = startWriters(t, e, 2, writersSubjects, func() bool { return headNow() > dropped+replayLimit+20 })
	waitUntil(t, "more events than the replay limit", func() bool { return !w.running() })
	w.wait()
	if err := c.resume(); err == nil || err.Code != -32010 {
		t.Fatalf("resume after %d events: %+v, want -32010", headNow()-dropped, err)
	}
	c.start()
	phase = headNow()
	w = startWriters(t, e, 3, writersSubjects, func() bool { return headNow() >= phase+80 })
	for w.running() {
		c.applyNext(100 * time.Millisecond)
	}
	w.wait()
	c.converge()
	if t.Failed() {
		return
	}
	t.Logf("after the resync: %d events applied in total", c.applied)
}

// TestClientRecipeAcrossPages follows the client recipe over a real WebSocket and Postgres
// with a snapshot loaded six items at a time while items are created, changed (a title and
// a state in one write), given dependencies and deleted between the pages, and others write
// concurrently: keeping the first page's seq and applying the events after it idempotently,
// the client converges to exactly the server's state.
func TestClientRecipeAcrossPages(t *testing.T) {
	env, e := startGateway(t, 0)
	e.must(201, "POST", "/api/v1/projects", "root", `{"key":"WEB","name":"Web"}`)
	for _, m := range [][2]string{{"alice", "member"}, {"bob", "member"}, {"vic", "viewer"}} {
		e.must(200, "PUT", "/api/v1/projects/WEB/members/"+m[0], "root", `{"role":"`+m[1]+`"}`)
	}
	for i := range 40 {
		e.must(201, "POST", "/api/v1/projects/WEB/items", "alice", fmt.Sprintf(`{"title":"seed %d"}`, i))
	}
	rng := rand.New(rand.NewPCG(9, 9))
	c := &recipeClient{t: t, env: env, api: e, subject: "vic", query: "?limit=6", between: func(page int) {
		switch page {
		case 1: // WEB-1..6 listed
			e.must(200, "PATCH", "/api/v1/items/WEB-10", "bob", `{"title":"renamed","state":"ready"}`)
			e.must(204, "DELETE", "/api/v1/items/WEB-15", "bob", "")
			e.must(201, "PUT", "/api/v1/items/WEB-20/dependencies/WEB-2", "bob", "")
			e.must(201, "POST", "/api/v1/projects/WEB/items", "bob", `{"title":"new"}`)
		case 2:
			e.must(204, "DELETE", "/api/v1/items/WEB-3", "bob", "")
			e.must(200, "PATCH", "/api/v1/items/WEB-30", "bob", `{"description":"changed"}`)
			e.must(200, "PATCH", "/api/v1/items/WEB-30", "bob", `{"state":"done"}`)
		default:
			for range 4 {
				if err := restWrite(e, rng, "alice"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}}
	c.conn = dialRPC(t, env, "vic")
	c.start()
	first := c.replica.Seq
	if c.api.head() < first+20 {
		t.Fatalf("only %d events were written while the pages loaded", c.api.head()-first)
	}
	phase := c.api.head()
	w := startWriters(t, e, 4, []string{"alice", "bob"}, func() bool { return c.api.head() >= phase+60 })
	for w.running() {
		c.applyNext(100 * time.Millisecond)
	}
	w.wait()
	c.converge()
	t.Logf("%d events after the first page's seq, %d applied", c.api.head()-first, c.applied)
}

// TestRevokeClosesSubscriptions revokes a member over REST: the hub closes that subject's open
// subscriptions with stream.closed "forbidden", others see member.revoked.
func TestRevokeClosesSubscriptions(t *testing.T) {
	env, e := startGateway(t, 0)
	e.must(201, "POST", "/api/v1/projects", "root", `{"key":"WEB","name":"Web"}`)
	e.must(200, "PUT", "/api/v1/projects/WEB/members/alice", "root", `{"role":"admin"}`)
	e.must(200, "PUT", "/api/v1/projects/WEB/members/bob", "alice", `{"role":"member"}`)
	e.must(200, "PUT", "/api/v1/projects/WEB/members/carol", "alice", `{"role":"viewer"}`)
	e.must(201, "POST", "/api/v1/projects/WEB/items", "bob", `{"title":"one"}`)

	carol := dialRPC(t, env, "carol")
	if _, err := carol.subscribe("p", "project:WEB", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.subscribe("i", "item:WEB-1", nil); err != nil {
		t.Fatal(err)
	}
	bob := dialRPC(t, env, "bob")
	if _, err := bob.subscribe("p", "project:WEB", nil); err != nil {
		t.Fatal(err)
	}
	e.must(204, "DELETE", "/api/v1/projects/WEB/members/carol", "alice", "")

	closed := map[string]string{}
	for len(closed) < 2 {
		sub, _, c, err := carol.nextNotice(15 * time.Second)
		if err != nil {
			t.Fatalf("waiting for stream.closed: %v (so far %v)", err, closed)
		}
		if c != nil {
			closed[sub] = c.Reason
		}
	}
	if closed["p"] != streams.ReasonForbidden || closed["i"] != streams.ReasonForbidden {
		t.Fatalf("closed %v", closed)
	}
	_, ev, _, err := bob.nextNotice(15 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ev == nil || ev.Type != "member.revoked" || ev.ActorKind != "human" || ev.ActorSubject != "alice" || string(ev.Payload) != `{"subject":"carol"}` {
		t.Fatalf("bob got %+v", ev)
	}
	if _, err := carol.subscribe("again", "project:WEB", nil); err == nil || err.Code != -32003 {
		t.Fatalf("subscribe after the revoke: %v, want -32003", err)
	}
	e.must(403, "GET", "/api/v1/projects/WEB/items", "carol", "")
}
