package migrations_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/streams/migrations"
	"github.com/ballet/gateway/streams/pgtest"
)

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestLatest(t *testing.T) {
	vs := migrations.Versions()
	if len(vs) == 0 || vs[len(vs)-1] != migrations.Latest() || !slices.IsSorted(vs) {
		t.Fatalf("Versions() = %v, Latest() = %q", vs, migrations.Latest())
	}
	if vs[0] != "0001_events" {
		t.Fatalf("first migration %q", vs[0])
	}
}

func TestApplyTwiceIsNoOp(t *testing.T) {
	ctx := ctxT(t)
	pool := newPool(t, pgtest.URL(t))
	applied, err := migrations.Apply(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, migrations.Versions()) {
		t.Fatalf("first Apply applied %v, want %v", applied, migrations.Versions())
	}
	applied, err = migrations.Apply(ctx, pool)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second Apply = %v, %v; want nothing applied", applied, err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(migrations.Versions()) {
		t.Fatalf("schema_migrations has %d rows", n)
	}
	// The lock is released: a session lock left on a pooled connection would block this.
	var got bool
	if err := pool.QueryRow(ctx, "SELECT pg_try_advisory_lock(7089066501272240130)").Scan(&got); err != nil || !got {
		t.Fatalf("migration lock still held: %v, %v", got, err)
	}
}

func TestApplyConcurrentlyAppliesOnce(t *testing.T) {
	ctx := ctxT(t)
	url := pgtest.URL(t)
	const n = 3
	pools := make([]*pgxpool.Pool, n)
	for i := range pools {
		pools[i] = newPool(t, url)
	}
	results := make([][]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = migrations.Apply(ctx, pools[i])
		})
	}
	close(start)
	wg.Wait()
	var all []string
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Apply %d: %v", i, errs[i])
		}
		all = append(all, results[i]...)
	}
	slices.Sort(all)
	if !slices.Equal(all, migrations.Versions()) {
		t.Fatalf("applied across processes %v, want each of %v once", all, migrations.Versions())
	}
	if err := migrations.Check(ctx, pools[0]); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	ctx := ctxT(t)
	pool := newPool(t, pgtest.URL(t))
	err := migrations.Check(ctx, pool)
	if !errors.Is(err, migrations.ErrOutdated) {
		t.Fatalf("Check on a fresh database = %v, want ErrOutdated", err)
	}
	want := "database schema is at none, this binary needs " + migrations.Latest() +
		": run `ballet-gateway migrate` or start with --migrate"
	if err.Error() != want {
		t.Fatalf("Check message %q, want %q", err, want)
	}
	if _, err := migrations.Apply(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Check(ctx, pool); err != nil {
		t.Fatalf("Check after Apply = %v", err)
	}
	// A database that recorded a version this binary lacks is newer, not outdated.
	if _, err := pool.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ('9999_future')"); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Check(ctx, pool); err != nil {
		t.Fatalf("Check with a newer database = %v", err)
	}
	// A missing version is reported with the highest one present.
	if _, err := pool.Exec(ctx, "DELETE FROM schema_migrations WHERE version = $1", migrations.Latest()); err != nil {
		t.Fatal(err)
	}
	err = migrations.Check(ctx, pool)
	if !errors.Is(err, migrations.ErrOutdated) || !strings.Contains(err.Error(), "is at 9999_future, this binary needs "+migrations.Latest()) {
		t.Fatalf("Check with a missing version = %v", err)
	}
}

// TestEventsContract checks the events table against the event-log contract with plain SQL,
// as any Core writer would use it.
func TestEventsContract(t *testing.T) {
	ctx := ctxT(t)
	pool := newPool(t, pgtest.URL(t))
	if _, err := migrations.Apply(ctx, pool); err != nil {
		t.Fatal(err)
	}
	_, err := pool.Exec(ctx, `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload)
		VALUES ('WEB', 'item.state_changed', 'item', '0199', 'WEB-42', 'human', '8751', '{"from":"backlog","to":"ready"}')`)
	if err != nil {
		t.Fatalf("contract INSERT: %v", err)
	}
	// Defaults and NULL entity_key; a seq given by the writer is replaced.
	_, err = pool.Exec(ctx, `INSERT INTO events (seq, project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject)
		VALUES (1000000, 'WEB', 'dependency.added', 'dependency', 'x', NULL, 'agent', 's')`)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "SELECT seq, entity_key IS NULL, payload::text, occurred_at > now() - interval '1 hour' FROM events ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		seq     int64
		null    bool
		payload string
		recent  bool
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.seq, &r.null, &r.payload, &r.recent); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []row{{1, false, `{"to": "ready", "from": "backlog"}`, true}, {2, true, `{}`, true}}
	if !slices.Equal(got, want) {
		t.Fatalf("rows %+v, want %+v", got, want)
	}
	// The project key check.
	if _, err := pool.Exec(ctx, "INSERT INTO projects (key, name) VALUES ('bad', 'x')"); err == nil {
		t.Fatal("lower-case project key accepted")
	}
	if _, err := pool.Exec(ctx, "INSERT INTO projects (key, name) VALUES ('WEB', 'Web')"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO project_members (project_key, subject, role) VALUES ('WEB', 'a', 'owner')"); err == nil {
		t.Fatal("role owner accepted")
	}
	if _, err := pool.Exec(ctx, "INSERT INTO project_members (project_key, subject, role) VALUES ('NOPE', 'a', 'viewer')"); err == nil {
		t.Fatal("member of a missing project accepted")
	}
}
