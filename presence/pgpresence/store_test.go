package pgpresence_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/presence"
	"github.com/ballet/gateway/presence/pgpresence"
	"github.com/ballet/gateway/streams/pgtest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// ttl is short so that the heartbeats that sweep and rewrite rows (every fifth of it) come
// within a test, and long enough that a loaded machine's late heartbeats do not expire a
// replica that is alive (the tests read its members).
const ttl = 5 * time.Second

func open(t *testing.T, pool *pgxpool.Pool) (*pgpresence.Store, chan []string) {
	t.Helper()
	s, err := pgpresence.Open(context.Background(), pool, &pgpresence.Options{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ch := make(chan []string, 100)
	cancel := s.Subscribe(func(streams []string) { ch <- streams })
	t.Cleanup(cancel)
	return s, ch
}

// wantStreams waits for a notification naming stream.
func wantStreams(t *testing.T, ch chan []string, stream string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case got := <-ch:
			if slices.Contains(got, stream) {
				return
			}
		case <-deadline:
			t.Fatalf("no notification for %s", stream)
		}
	}
}

func read(t *testing.T, s *pgpresence.Store, stream string, limit int) map[string]int {
	t.Helper()
	got, err := s.Read(context.Background(), []string{stream}, limit)
	if err != nil {
		t.Fatal(err)
	}
	return got[stream]
}

func flush(t *testing.T, s *pgpresence.Store, counts ...presence.Count) {
	t.Helper()
	if err := s.Flush(context.Background(), counts); err != nil {
		t.Fatal(err)
	}
}

func TestFlushReadNotify(t *testing.T) {
	pool := pgtest.Pool(t)
	a, _ := open(t, pool)
	b, bch := open(t, pool)
	flush(t, a, presence.Count{Stream: "project:WEB", Subject: "alice", Connections: 2},
		presence.Count{Stream: "item:WEB-1", Subject: "alice", Connections: 1})
	wantStreams(t, bch, "project:WEB")
	if got := read(t, b, "project:WEB", 10); !maps.Equal(got, map[string]int{"alice": 2}) {
		t.Fatalf("b reads %v", got)
	}
	// A replica reads only the others' members.
	if got := read(t, a, "project:WEB", 10); len(got) != 0 {
		t.Fatalf("a reads its own members: %v", got)
	}
	// A count change is written but not announced; a removal is both.
	flush(t, a, presence.Count{Stream: "project:WEB", Subject: "alice", Connections: 1})
	if got := read(t, b, "project:WEB", 10); got["alice"] != 1 {
		t.Fatalf("b reads %v after the count changed", got)
	}
	flush(t, a, presence.Count{Stream: "project:WEB", Subject: "alice", Connections: 0})
	wantStreams(t, bch, "project:WEB")
	if got := read(t, b, "project:WEB", 10); len(got) != 0 {
		t.Fatalf("b reads %v after alice left", got)
	}
	// Close removes a replica's members at once and tells the others.
	a.Close()
	wantStreams(t, bch, "item:WEB-1")
	if got := read(t, b, "item:WEB-1", 10); len(got) != 0 {
		t.Fatalf("b reads %v after a closed", got)
	}
}

func TestReadBoundAndOrder(t *testing.T) {
	pool := pgtest.Pool(t)
	a, _ := open(t, pool)
	b, _ := open(t, pool)
	var counts []presence.Count
	// Bytewise order: "Zed" < "alice" < "ärger".
	for _, s := range []string{"ärger", "alice", "Zed", "bob"} {
		counts = append(counts, presence.Count{Stream: "project:WEB", Subject: s, Connections: 1})
	}
	flush(t, a, counts...)
	if got := read(t, b, "project:WEB", 2); !maps.Equal(got, map[string]int{"Zed": 1, "alice": 1, "bob": 1}) {
		t.Fatalf("limit 2 reads %v, want the first 3 in bytewise order", got)
	}
}

func TestManyStreamsInOneFlush(t *testing.T) {
	pool := pgtest.Pool(t)
	a, _ := open(t, pool)
	b, bch := open(t, pool)
	var counts []presence.Count
	var names []string
	for i := range 300 {
		name := fmt.Sprintf("item:%s-%d", strings.Repeat("K", 60), i)
		names = append(names, name)
		counts = append(counts, presence.Count{Stream: name, Subject: "alice", Connections: 1})
	}
	flush(t, a, counts...)
	seen := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for len(seen) < len(names) {
		select {
		case got := <-bch:
			for _, s := range got {
				seen[s] = true
			}
		case <-deadline:
			t.Fatalf("notified of %d of %d streams", len(seen), len(names))
		}
	}
	got, err := b.Read(context.Background(), names, 10)
	if err != nil || len(got) != len(names) || got[names[299]]["alice"] != 1 {
		t.Fatalf("read %d streams: %v", len(got), err)
	}
}

func TestDeadReplicaIsSwept(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	b, bch := open(t, pool)
	// A replica that stopped renewing its row long ago, as one that was killed.
	if _, err := pool.Exec(ctx, `INSERT INTO presence_replicas (id, heartbeat_at) VALUES ('dead', now() - interval '1 hour');
		INSERT INTO presence_members (replica, stream, subject, connections) VALUES ('dead', 'project:WEB', 'ghost', 1)`); err != nil {
		t.Fatal(err)
	}
	// Readers ignore it at once; the sweep removes it and tells everyone, itself included.
	if got := read(t, b, "project:WEB", 10); len(got) != 0 {
		t.Fatalf("b reads %v from a dead replica", got)
	}
	wantStreams(t, bch, "project:WEB")
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM presence_members WHERE replica = 'dead'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("dead replica's members: %d, %v", n, err)
	}
}

func TestExpiredReplicaWritesItsMembersAgain(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	a, _ := open(t, pool)
	b, bch := open(t, pool)
	flush(t, a, presence.Count{Stream: "project:WEB", Subject: "alice", Connections: 1})
	wantStreams(t, bch, "project:WEB")
	// Another replica judged a expired (its database was too slow, say) and removed it.
	if _, err := pool.Exec(ctx, `DELETE FROM presence_replicas WHERE id = $1`, a.ID()); err != nil {
		t.Fatal(err)
	}
	// a's next heartbeat writes its row and members again, and tells the others.
	wantStreams(t, bch, "project:WEB")
	if got := read(t, b, "project:WEB", 10); got["alice"] != 1 {
		t.Fatalf("b reads %v after a came back", got)
	}
	// A flush that meets the removal itself writes everything again too.
	if _, err := pool.Exec(ctx, `DELETE FROM presence_replicas WHERE id = $1`, a.ID()); err != nil {
		t.Fatal(err)
	}
	flush(t, a, presence.Count{Stream: "item:WEB-1", Subject: "alice", Connections: 1})
	if got := read(t, b, "project:WEB", 10); got["alice"] != 1 {
		t.Fatalf("b reads %v on project:WEB after a's flush", got)
	}
	if got := read(t, b, "item:WEB-1", 10); got["alice"] != 1 {
		t.Fatalf("b reads %v on item:WEB-1 after a's flush", got)
	}
}
