package pglog_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/logtest"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/streams/pgtest"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, pool *pgxpool.Pool, opts *pglog.Options) *pglog.Log {
	t.Helper()
	l, err := pglog.Open(t.Context(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// The conformance suite, each test on a database of its own, in parallel.
func TestConformance(t *testing.T) {
	logtest.RunParallel(t, func(t *testing.T) (streams.Log, streams.Appender) {
		l := open(t, pgtest.Pool(t), nil)
		return l, l
	})
}

// connect opens a connection of its own to the pool's database, as another Core writer would.
func connect(ctx context.Context, pool *pgxpool.Pool) (*pgx.Conn, error) {
	return pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
}

// collector is a tailer sink that checks order and remembers everything it was handed.
type collector struct {
	mu     sync.Mutex
	events []streams.Event
	errs   []string
}

func (c *collector) sink(evs []streams.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range evs {
		if n := len(c.events); n > 0 && e.Seq <= c.events[n-1].Seq {
			c.errs = append(c.errs, fmt.Sprintf("seq %d after %d", e.Seq, c.events[n-1].Seq))
		}
		c.events = append(c.events, e)
	}
}

func (c *collector) snapshot() ([]streams.Event, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events), slices.Clone(c.errs)
}

func startTailer(t *testing.T, l streams.Log, c *collector, batch int) *streams.Tailer {
	t.Helper()
	tl := streams.NewTailer(l, c.sink, &streams.TailerOptions{Batch: batch})
	if err := tl.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tl.Close() })
	return tl
}

// waitFor polls cond until it holds or the test's patience (not a speed requirement) ends.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeLog records what concurrent writers did, by event id (entity_id).
type writeLog struct {
	mu         sync.Mutex
	committed  map[string]bool
	rolledBack map[string]bool
	txOf       map[string]string // event id → transaction id, for committed events
	txSize     map[string]int
}

func newWriteLog() *writeLog {
	return &writeLog{committed: map[string]bool{}, rolledBack: map[string]bool{}, txOf: map[string]string{}, txSize: map[string]int{}}
}

// writeTx runs one transaction of ids with plain SQL, sleeping 0–3 ms before, between and after
// the inserts, and commits or rolls back. It reports the outcome: committed, rolled back, or
// unknown (an error, e.g. a terminated connection, left it undecided from the client's view).
func writeTx(ctx context.Context, conn *pgx.Conn, ids []string, rollback bool, rng *rand.Rand) (outcome string, err error) {
	nap := func() { time.Sleep(time.Duration(rng.IntN(3001)) * time.Microsecond) }
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "rolledback", err
	}
	defer tx.Rollback(context.Background())
	nap()
	const ins = `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload) VALUES `
	if len(ids) > 1 && rng.IntN(2) == 0 {
		// One multi-row statement.
		q := ins
		args := []any{}
		for i, id := range ids {
			if i > 0 {
				q += ", "
			}
			q += fmt.Sprintf("('LOAD', 'item.updated', 'item', $%d, 'LOAD-1', 'human', 'writer', $%d)", 2*i+1, 2*i+2)
			args = append(args, id, fmt.Sprintf(`{"id":%q}`, id))
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return "rolledback", err
		}
	} else {
		for _, id := range ids {
			if _, err := tx.Exec(ctx, ins+"('LOAD', 'item.updated', 'item', $1, 'LOAD-1', 'human', 'writer', $2)", id, fmt.Sprintf(`{"id":%q}`, id)); err != nil {
				return "rolledback", err
			}
			nap()
		}
	}
	nap()
	if rollback {
		if err := tx.Rollback(ctx); err != nil {
			return "unknown", err
		}
		return "rolledback", nil
	}
	if err := tx.Commit(ctx); err != nil {
		return "unknown", err
	}
	return "committed", nil
}

func (w *writeLog) record(txID string, ids []string, outcome string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		switch outcome {
		case "committed":
			w.committed[id] = true
			w.txOf[id] = txID
		case "rolledback":
			w.rolledBack[id] = true
		}
	}
	if outcome == "committed" {
		w.txSize[txID] = len(ids)
	}
}

// TestCommitOrder proves that seq follows commit order: 6 writers on their own connections
// insert with plain SQL in transactions that sleep while holding their rows, some with several
// rows and some rolled back, while a tailer and a reader polling "seq > last" as fast as it can
// read along. Both must see every committed event exactly once, in strictly increasing seq,
// and nothing rolled back. With a plain sequence, a transaction that drew a smaller seq but
// committed later would be skipped by both.
func TestCommitOrder(t *testing.T) {
	commitOrder(t, pgtest.Pool(t), nil)
}

// commitOrder writes from concurrent writers on pool and reads with a log opened with opts.
func commitOrder(t *testing.T, pool *pgxpool.Pool, opts *pglog.Options) {
	ctx := ctxT(t, 5*time.Minute)
	l := open(t, pool, opts)
	var tailed collector
	tl := startTailer(t, l, &tailed, 50)

	// The hot reader: ReadAfter in a tight loop, no waiting.
	var polled collector
	stopPoll := make(chan struct{})
	pollDone := make(chan error, 1)
	go func() {
		var pos int64
		for {
			select {
			case <-stopPoll:
				pollDone <- nil
				return
			default:
			}
			evs, err := l.ReadAfter(ctx, pos, 1000)
			if err != nil {
				pollDone <- err
				return
			}
			if len(evs) > 0 {
				polled.sink(evs)
				pos = evs[len(evs)-1].Seq
			}
		}
	}()

	const writers, perWriter = 6, 500
	w := newWriteLog()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for wi := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(wi), 42))
			conn, err := connect(ctx, pool)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(context.Background())
			for n, tx := 0, 0; n < perWriter; tx++ {
				k := min(1+rng.IntN(5), perWriter-n)
				ids := make([]string, k)
				for i := range ids {
					ids[i] = fmt.Sprintf("w%d-t%d-r%d", wi, tx, i)
				}
				txID := fmt.Sprintf("w%d-t%d", wi, tx)
				outcome, err := writeTx(ctx, conn, ids, rng.IntN(10) == 0, rng)
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", wi, err)
					return
				}
				w.record(txID, ids, outcome)
				n += k
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	head, err := l.PrimaryHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tailer to reach the head", 2*time.Minute, func() bool { return tl.Position() >= head })
	waitFor(t, "the hot reader to reach the head", 2*time.Minute, func() bool {
		evs, _ := polled.snapshot()
		return len(evs) > 0 && evs[len(evs)-1].Seq >= head
	})
	close(stopPoll)
	if err := <-pollDone; err != nil {
		t.Fatal(err)
	}
	if len(w.committed) < 2500 || len(w.rolledBack) == 0 {
		t.Fatalf("workload too small: %d committed, %d rolled back", len(w.committed), len(w.rolledBack))
	}
	for name, c := range map[string]*collector{"tailer": &tailed, "hot reader": &polled} {
		evs, orderErrs := c.snapshot()
		if len(orderErrs) > 0 {
			t.Fatalf("%s: out of order: %v", name, orderErrs[:min(5, len(orderErrs))])
		}
		checkExactly(t, name, evs, w)
	}
	t.Logf("%d events committed in %d transactions, %d rolled back", len(w.committed), len(w.txSize), len(w.rolledBack))
}

// checkExactly verifies that evs hold each committed event once, nothing rolled back, and that
// each transaction's events are contiguous (transactions are serialized).
func checkExactly(t *testing.T, name string, evs []streams.Event, w *writeLog) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.EntityID] {
			t.Fatalf("%s: event %s delivered twice", name, e.EntityID)
		}
		seen[e.EntityID] = true
		if w.rolledBack[e.EntityID] {
			t.Fatalf("%s: event %s of a rolled-back transaction delivered", name, e.EntityID)
		}
		if !w.committed[e.EntityID] {
			t.Fatalf("%s: event %s was never committed", name, e.EntityID)
		}
	}
	for id := range w.committed {
		if !seen[id] {
			t.Fatalf("%s: committed event %s never delivered (%d of %d delivered)", name, id, len(seen), len(w.committed))
		}
	}
	for i := 0; i < len(evs); {
		tx := w.txOf[evs[i].EntityID]
		n := w.txSize[tx]
		for j := range n {
			if i+j >= len(evs) || w.txOf[evs[i+j].EntityID] != tx {
				t.Fatalf("%s: transaction %s's events are not contiguous at seq %d", name, tx, evs[i].Seq)
			}
		}
		i += n
	}
}

// TestPsqlInsertArrivesThroughListen inserts with the psql binary in another process; with the
// poll interval at an hour, only the LISTEN connection can deliver it.
func TestPsqlInsertArrivesThroughListen(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Fatalf("psql binary needed: %v", err)
	}
	ctx := ctxT(t, 2*time.Minute)
	pool := pgtest.Pool(t)
	l := open(t, pool, &pglog.Options{PollInterval: time.Hour})
	var c collector
	startTailer(t, l, &c, 100)
	waitBlockedInWait(t, "streams.(*Tailer).run") // else a read of the head could find the event
	out, err := exec.CommandContext(ctx, psql, pool.Config().ConnConfig.ConnString(), "-v", "ON_ERROR_STOP=1", "-c",
		`INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload)
		 VALUES ('WEB', 'item.state_changed', 'item', 'from-psql', 'WEB-42', 'human', 'psql', '{"from":"backlog","to":"ready"}')`).CombinedOutput()
	if err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
	waitFor(t, "the psql event", time.Minute, func() bool {
		evs, _ := c.snapshot()
		return len(evs) == 1
	})
	evs, _ := c.snapshot()
	if e := evs[0]; e.EntityID != "from-psql" || e.EntityKey != "WEB-42" || string(e.Payload) != `{"to": "ready", "from": "backlog"}` {
		t.Fatalf("event %+v", e)
	}
}

// TestWaitPollsWithoutNotify: with the notify trigger disabled, Wait still returns once the
// poll sees the new event.
func TestWaitPollsWithoutNotify(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	pool := pgtest.Pool(t)
	if _, err := pool.Exec(ctx, "ALTER TABLE events DISABLE TRIGGER events_notify"); err != nil {
		t.Fatal(err)
	}
	l := open(t, pool, &pglog.Options{PollInterval: 100 * time.Millisecond})
	head, err := l.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, head) }()
	// Several polls find nothing: Wait keeps blocking.
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v with nothing new", err)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := pool.Exec(ctx, `INSERT INTO events (project_key, type, entity_type, entity_id, actor_kind, actor_subject)
		VALUES ('WEB', 't', 'item', 'x', 'human', 's')`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Wait did not return after the poll could see the event")
	}
}

func TestClose(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	pool := pgtest.Pool(t)
	l, err := pglog.Open(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := l.ListenerPID()
	done := make(chan error, 1)
	go func() {
		for { // wake-ups before Close may be spurious
			if err := l.Wait(ctx, 0); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, streams.ErrClosed) {
		t.Fatalf("Wait across Close = %v, want ErrClosed", err)
	}
	if err := l.Wait(ctx, 0); !errors.Is(err, streams.ErrClosed) {
		t.Fatalf("Wait after Close = %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the listener connection to end", time.Minute, func() bool {
		var n int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n)
		return err == nil && n == 0
	})
	if l.ListenerPID() != 0 {
		t.Fatalf("ListenerPID after Close = %d", l.ListenerPID())
	}
}

func TestOpenFailsWithoutDatabase(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/nope?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if l, err := pglog.Open(t.Context(), pool, nil); err == nil {
		l.Close()
		t.Fatal("Open succeeded without a database")
	}
}
