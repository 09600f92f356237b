package pglisting_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/operator/operatortest"
	"github.com/ballet/gateway/operator/pglisting"
	"github.com/ballet/gateway/streams/pgtest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// source lists the connections of a replica: n of each subject; blocked, when set, holds
// each listing until it is closed.
type source struct {
	subjects []string
	n        int
	blocked  chan struct{}
	entered  chan struct{}
}

func (s *source) Connections(subject string, limit int) ([]operator.Connection, bool) {
	if s.blocked != nil {
		s.entered <- struct{}{}
		<-s.blocked
	}
	var out []operator.Connection
	for _, sub := range s.subjects {
		for i := range s.n {
			if subject != "" && sub != subject {
				continue
			}
			if len(out) == limit {
				return out, true
			}
			out = append(out, operator.Connection{ID: fmt.Sprintf("%s-%d", sub, i), Subject: sub, Codec: "json",
				ConnectedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(time.Hour).UTC()})
		}
	}
	return out, false
}

// register adds replicas to presence_replicas, as pgpresence does at start.
func register(t *testing.T, pool *pgxpool.Pool, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := pool.Exec(context.Background(), `INSERT INTO presence_replicas (id) VALUES ($1)`, id); err != nil {
			t.Fatal(err)
		}
	}
}

func open(t *testing.T, pool *pgxpool.Pool, o *pglisting.Options) *pglisting.Lister {
	t.Helper()
	l, err := pglisting.Open(context.Background(), pool, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// rows counts the listings and answers left in the tables.
func rows(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM connection_listings) + (SELECT count(*) FROM connection_listing_answers)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func ids(l *operator.Listing) []string {
	var out []string
	for _, c := range l.Connections {
		out = append(out, c.Replica+"/"+c.ID)
	}
	return out
}

// TestListAcrossReplicas: an asker that is no replica gathers the answers of every registered
// replica, within the limit over all of them; a registered replica that does not answer is
// listed as such once the wait is over; nothing is left in the tables; a listing an asker
// left behind is removed by the next.
func TestListAcrossReplicas(t *testing.T) {
	pool := pgtest.Pool(t)
	register(t, pool, "r1", "r2", "r3")
	var seen operatortest.Outcomes
	opts := operator.ListOptions{Observe: seen.Observe}
	open(t, pool, &pglisting.Options{ListOptions: opts, Replica: "r1", Source: &source{subjects: []string{"alice", "bob"}, n: 1}})
	open(t, pool, &pglisting.Options{ListOptions: opts, Replica: "r2", Source: &source{subjects: []string{"alice"}, n: 2}})
	asker := open(t, pool, nil)
	if _, err := pool.Exec(context.Background(), `INSERT INTO connection_listings (id, asked_at) VALUES ('old', now() - interval '2 minutes')`); err != nil {
		t.Fatal(err)
	}

	asked := time.Now()
	l, err := asker.List(context.Background(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(asked); d < operator.ListWait {
		t.Fatalf("answered after %v, before r3 could: want a wait of %v", d, operator.ListWait)
	}
	want := []operator.ReplicaAnswer{{Replica: "r1", Answered: true}, {Replica: "r2", Answered: true}, {Replica: "r3"}}
	if !slices.Equal(l.Replicas, want) || l.Truncated {
		t.Fatalf("replicas %+v, truncated %v", l.Replicas, l.Truncated)
	}
	if got := ids(l); !slices.Equal(got, []string{"r1/alice-0", "r2/alice-0", "r2/alice-1", "r1/bob-0"}) {
		t.Fatalf("connections %v", got)
	}
	if n := rows(t, pool); n != 0 {
		t.Fatalf("%d rows left", n)
	}

	// Without the replica that does not answer the listing waits for none.
	if _, err := pool.Exec(context.Background(), `DELETE FROM presence_replicas WHERE id = 'r3'`); err != nil {
		t.Fatal(err)
	}
	l, err = asker.List(context.Background(), "alice", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(l); !slices.Equal(got, []string{"r1/alice-0", "r2/alice-0"}) || !l.Truncated || len(l.Replicas) != 2 {
		t.Fatalf("alice, limit 2: %v, truncated %v, replicas %+v", got, l.Truncated, l.Replicas)
	}
	// Each counts its answer once it is committed, which its asker may have read before.
	waitFor(t, func() bool { return seen.Get(operator.ListingAnswered) == 4 })
	if asks := seen.Get(operator.ListingAsked); asks != 0 {
		t.Fatalf("asked %d by the replicas", asks)
	}
}

// TestAnswersBound: a replica answers at most MaxListings listings at once: one more is not
// answered (counted as busy), and the asker lists the replica as not answering. An answer
// that comes after its asker gave up is refused and counted as failed; it leaves nothing.
func TestAnswersBound(t *testing.T) {
	pool := pgtest.Pool(t)
	register(t, pool, "r1")
	src := &source{subjects: []string{"alice"}, n: 1, blocked: make(chan struct{}), entered: make(chan struct{}, 4)}
	var seen operatortest.Outcomes
	open(t, pool, &pglisting.Options{ListOptions: operator.ListOptions{MaxListings: 1, Observe: seen.Observe}, Replica: "r1", Source: src})
	asker := open(t, pool, &pglisting.Options{ListOptions: operator.ListOptions{MaxListings: 2}})

	first := make(chan *operator.Listing, 1)
	go func() {
		l, err := asker.List(context.Background(), "", 10)
		if err != nil {
			t.Error(err)
		}
		first <- l
	}()
	<-src.entered
	second, err := asker.List(context.Background(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Replicas) != 1 || second.Replicas[0].Answered || seen.Get(operator.ListingBusy) != 1 {
		t.Fatalf("a listing past the bound: %+v, busy %d", second.Replicas, seen.Get(operator.ListingBusy))
	}
	if l := <-first; l == nil || l.Replicas[0].Answered {
		t.Fatalf("a listing whose answer was held past the wait: %+v", l)
	}
	close(src.blocked)
	waitFor(t, func() bool { return seen.Get(operator.ListingFailed) == 1 })
	if n := rows(t, pool); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	if seen.Get(operator.ListingAnswered) != 0 {
		t.Fatal("an answer counted as answered")
	}
}

// TestCatchUpAfterReconnect: a replica whose listening connection is lost misses the asks
// notified meanwhile; once it listens again it answers the listings still waiting, with their
// limit and subject.
func TestCatchUpAfterReconnect(t *testing.T) {
	pool := pgtest.Pool(t)
	register(t, pool, "r1")
	var seen operatortest.Outcomes
	open(t, pool, &pglisting.Options{ListOptions: operator.ListOptions{Observe: seen.Observe}, Replica: "r1",
		Source: &source{subjects: []string{"alice", "bob"}, n: 2}})
	ctx := context.Background()
	// An ask whose notification the replica never received, then the loss of its connection.
	if _, err := pool.Exec(ctx, `INSERT INTO connection_listings (id, max_connections, subject) VALUES ('missed', 1, 'bob')`); err != nil {
		t.Fatal(err)
	}
	var killed bool
	if err := pool.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'ballet-gateway-listings'`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminating the listener: %v, %v", killed, err)
	}
	waitFor(t, func() bool { return seen.Get(operator.ListingAnswered) == 1 })
	var truncated bool
	var body string
	if err := pool.QueryRow(ctx, `SELECT truncated, convert_from(connections, 'UTF8') FROM connection_listing_answers
		WHERE listing = 'missed' AND replica = 'r1'`).Scan(&truncated, &body); err != nil {
		t.Fatal(err)
	}
	if !truncated || !strings.Contains(body, `"bob-0"`) || strings.Contains(body, "alice") || strings.Contains(body, `"bob-1"`) {
		t.Fatalf("the answer: truncated %v, %s; want bob's first connection of two", truncated, body)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}
