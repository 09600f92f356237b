package pglog_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/streams/pgtest"
)

// TestListenerReconnectWakesWaiters: when the LISTEN connection is terminated, the log
// reconnects and wakes waiters, since notifications may have been lost meanwhile.
func TestListenerReconnectWakesWaiters(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	pool := pgtest.Pool(t)
	l := open(t, pool, &pglog.Options{PollInterval: time.Hour})
	pid := l.ListenerPID()
	if pid == 0 {
		t.Fatal("no listener pid after Open")
	}
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, 0) }()
	waitBlockedInWait(t, t.Name())
	terminate(t, pool, pid)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Wait not woken by the listener's reconnect")
	}
	waitFor(t, "a new listener", time.Minute, func() bool { p := l.ListenerPID(); return p != 0 && p != pid })
	// The new connection listens: an insert wakes a waiter although polls are an hour apart.
	head, _ := l.Head(ctx)
	go func() { done <- l.Wait(ctx, head) }()
	waitBlockedInWait(t, t.Name()) // so that only the notification can wake it
	if _, err := l.Append(ctx, streams.NewEvent{ProjectKey: "WEB", Type: "t", EntityType: "item", EntityID: "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Wait not woken by a notification on the new listener")
	}
}

// waitBlockedInWait waits until a goroutine whose stack names caller is blocked in
// Log.Wait's select: from then on it holds the wake channel that a notification or a
// reconnect closes.
func waitBlockedInWait(t *testing.T, caller string) {
	t.Helper()
	waitFor(t, "the waiter to block in Wait", time.Minute, func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			header, frames, _ := strings.Cut(g, "\n")
			if strings.Contains(header, "[select") && strings.Contains(frames, caller) &&
				strings.HasPrefix(frames, "github.com/ballet/gateway/streams/pglog.(*Log).Wait(") {
				return true
			}
		}
		return false
	})
}

func terminate(t *testing.T, pool *pgxpool.Pool, pid int32) {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

// TestTailerSurvivesTerminatedBackends terminates the listener, then every backend of the
// database, while writers keep writing: the tailer ends with exactly the committed rows.
// Polls are an hour apart, so recovery relies on the listener's reconnect and the read retries.
func TestTailerSurvivesTerminatedBackends(t *testing.T) {
	ctx := ctxT(t, 5*time.Minute)
	pool := pgtest.Pool(t)
	l := open(t, pool, &pglog.Options{PollInterval: time.Hour})
	var c collector
	tl := startTailer(t, l, &c, 20)

	admin, err := connect(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	w := newWriteLog()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for wi := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(wi), 7))
			var conn *pgx.Conn
			defer func() {
				if conn != nil {
					conn.Close(context.Background())
				}
			}()
			for tx := 0; ; tx++ {
				select {
				case <-stop:
					return
				default:
				}
				if conn == nil || conn.IsClosed() {
					var err error
					if conn, err = connect(ctx, pool); err != nil {
						conn = nil
						time.Sleep(20 * time.Millisecond)
						continue
					}
				}
				k := 1 + rng.IntN(3)
				ids := make([]string, k)
				for i := range ids {
					ids[i] = fmt.Sprintf("w%d-t%d-r%d", wi, tx, i)
				}
				outcome, err := writeTx(ctx, conn, ids, rng.IntN(10) == 0, rng)
				w.record(fmt.Sprintf("w%d-t%d", wi, tx), ids, outcome)
				if err != nil {
					conn.Close(context.Background())
					conn = nil
				}
			}
		})
	}

	time.Sleep(300 * time.Millisecond)
	pid := l.ListenerPID()
	var ok bool
	if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate listener %d: %v, %v", pid, ok, err)
	}
	waitFor(t, "a new listener", time.Minute, func() bool { p := l.ListenerPID(); return p != 0 && p != pid })
	time.Sleep(300 * time.Millisecond)
	for range 2 {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		t.Logf("terminated %d backends", n)
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	// The table is the truth: commits cut off by a termination may or may not have happened.
	rows, err := admin.Query(ctx, "SELECT seq, entity_id FROM events ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		seq int64
		id  string
	}
	truth, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.seq, &x.id)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(truth) == 0 {
		t.Fatal("nothing was written")
	}
	last := truth[len(truth)-1].seq
	waitFor(t, "the tailer to reach the last row", 2*time.Minute, func() bool { return tl.Position() >= last })
	evs, orderErrs := c.snapshot()
	if len(orderErrs) > 0 {
		t.Fatalf("out of order: %v", orderErrs)
	}
	if len(evs) != len(truth) {
		t.Fatalf("tailer got %d events, the table holds %d", len(evs), len(truth))
	}
	inTable := map[string]bool{}
	for i, e := range evs {
		if e.Seq != truth[i].seq || e.EntityID != truth[i].id {
			t.Fatalf("event %d: tailer got seq %d %s, table has seq %d %s", i, e.Seq, e.EntityID, truth[i].seq, truth[i].id)
		}
		inTable[e.EntityID] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.committed {
		if !inTable[id] {
			t.Fatalf("committed event %s missing", id)
		}
	}
	for id := range w.rolledBack {
		if inTable[id] {
			t.Fatalf("rolled-back event %s present", id)
		}
	}
	t.Logf("%d events, %d committed for sure, %d rolled back", len(truth), len(w.committed), len(w.rolledBack))
}
