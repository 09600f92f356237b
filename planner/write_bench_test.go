package planner_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

// burst is a model that answers every call with n text deltas of 40 bytes at once, as fast
// as the turn takes them.
type burst struct{ n int }

func (burst) Name() string { return "burst" }

func (burst) Model() string { return "burst" }

func (m burst) Stream(ctx context.Context, _ *provider.Request, onDelta func(provider.Delta) error) (*provider.Response, error) {
	const delta = "forty bytes of model output, more or les"
	for range m.n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := onDelta(provider.Delta{Type: provider.DeltaText, Text: delta}); err != nil {
			return nil, err
		}
	}
	return &provider.Response{Content: []provider.Block{{Type: provider.BlockText, Text: strings.Repeat(delta, m.n)}},
		StopReason: provider.StopEndTurn}, nil
}

// BenchmarkOutputWrite measures the write path of planner output on Postgres: turns run at
// once on one replica, each streaming deltas as fast as it can, and one watcher per session
// on a second replica hears each to its done. It reports outputs per second delivered, and
// the CPU the database's backends of the test database spent per output (read from /proc,
// so on a database on the same machine only). BALLET_BENCH_LISTENERS more replicas' buses
// listen meanwhile, with no watcher.
func BenchmarkOutputWrite(b *testing.B) {
	const perTurn = 200
	for _, turns := range []int{1, 10, 100} {
		for _, window := range benchWindows() {
			b.Run(fmt.Sprintf("turns=%d/window=%s", turns, window), func(b *testing.B) {
				benchOutputWrite(b, turns, perTurn, window)
			})
		}
	}
}

// benchWindows are the output windows measured: BALLET_BENCH_WINDOWS (comma-separated
// durations, 0 for none) or the default ones.
func benchWindows() []time.Duration {
	v := os.Getenv("BALLET_BENCH_WINDOWS")
	if v == "" {
		v = "0,5ms,20ms,50ms"
	}
	var out []time.Duration
	for _, f := range strings.Split(v, ",") {
		d, err := time.ParseDuration(f)
		if err != nil {
			panic(err)
		}
		out = append(out, d)
	}
	return out
}

func benchOutputWrite(b *testing.B, turns, perTurn int, window time.Duration) {
	be := newBackend(b, "postgres")
	opts := &planner.Options{Provider: burst{perTurn}, TurnsPerSubject: turns, SessionRate: 10 * turns,
		TurnOutputs: 2 * perTurn, WatchQueue: 4 * perTurn}
	setWindow(opts, window)
	run, _ := be.service(b, opts, nil)
	far, _ := be.service(b, opts, nil)
	listeners, _ := strconv.Atoi(os.Getenv("BALLET_BENCH_LISTENERS"))
	for range listeners {
		be.bus(b)
	}
	ids := make([]string, turns)
	for i := range ids {
		ids[i] = be.newSession(b, run)
	}
	cpu0 := dbCPU(b, be.pool)
	b.ResetTimer()
	start := time.Now()
	delivered := 0
	for range b.N {
		ws := make([]*watcher, turns)
		for i, id := range ids {
			ws[i] = watch(b, far, alice, id)
		}
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := run.Send(ctxT(b), alice, id, "go"); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		for _, w := range ws {
			outs := w.until(b, planner.OutputDone)
			delivered += len(outs)
			w.stop()
		}
	}
	took := time.Since(start)
	b.StopTimer()
	cpu := dbCPU(b, be.pool) - cpu0
	b.ReportMetric(float64(delivered)/took.Seconds(), "outputs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(delivered), "db-µs/output")
}

// dbCPU is the CPU time the test database's backends have used, from /proc.
func dbCPU(b *testing.B, pool *pgxpool.Pool) time.Duration {
	rows, err := pool.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var total time.Duration
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // not on this machine, or gone
		}
		_, rest, _ := strings.Cut(string(stat), ") ")
		f := strings.Fields(rest)
		utime, _ := strconv.Atoi(f[11])
		stime, _ := strconv.Atoi(f[12])
		total += time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100
	}
	return total
}
