package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/streams"
)

// The writer appends events the way any Core component does: a plain SQL
// INSERT into events (the columns of docs/event-log.md's contract), deliberately not
// pglog.Insert, since it stands for a program outside the gateway. A batch
// is one INSERT of --batch rows, in its own (implicit, or with --explicit-tx
// an explicit BEGIN … COMMIT) transaction. Every payload carries the intended
// commit time "t" (Unix ns), the run id "r", the writer "w" and the
// writer's running number "i", padded to about --payload-bytes.
const insertSQL = `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, actor_kind, actor_subject, payload)
SELECT $1, 'bench.event', $2, $3, $4, 'service', 'ballet-bench',
       jsonb_build_object('t', $5::bigint, 'r', $6::text, 'w', $7::int, 'i', $8::bigint + g, 'pad', $9::text)
FROM generate_series(0, $10::int - 1) AS g
RETURNING seq`

// payloadOverhead is roughly what the payload takes besides "pad".
const payloadOverhead = 80

// writerSet runs --writers concurrent writers against the database.
type writerSet struct {
	pool    *pgxpool.Pool
	cfg     *config
	runID   string
	commits *commitLog
	pad     string

	project    string
	entityType string
	entityKey  *string

	events atomic.Int64
	txs    atomic.Int64
	behind atomic.Int64 // transactions that started later than their slot
	txLat  histogram    // INSERT start → COMMIT returned
}

func newWriterSet(pool *pgxpool.Pool, cfg *config, commits *commitLog) *writerSet {
	var id [6]byte
	_, _ = rand.Read(id[:])
	w := &writerSet{
		pool: pool, cfg: cfg, commits: commits, runID: hex.EncodeToString(id[:]),
		pad:        strings.Repeat("x", max(cfg.payloadBytes-payloadOverhead, 0)),
		project:    cfg.stream.Project(),
		entityType: "bench",
	}
	if cfg.stream.Kind == streams.StreamItem {
		key := cfg.stream.Key
		w.entityType, w.entityKey = "item", &key
	}
	return w
}

// writeSpec bounds one writing phase.
type writeSpec struct {
	rate     float64   // events/s over all writers; 0 = as fast as possible
	until    time.Time // stop starting transactions after this (zero: none)
	total    int64     // stop after this many events in all (0: none)
	batch    int
	writers  int
	startNum []int64 // each writer's next "i"; updated on return
	// gate, when set, is waited on before each transaction (flow control).
	gate func(ctx context.Context) error
}

// run writes until the spec's bounds; the first error stops every writer.
func (ws *writerSet) run(ctx context.Context, spec *writeSpec) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if spec.startNum == nil {
		spec.startNum = make([]int64, spec.writers)
	}
	var wg sync.WaitGroup
	var remaining atomic.Int64
	remaining.Store(spec.total)
	start := time.Now()
	for w := range spec.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ws.writer(ctx, w, spec, start, &remaining); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && err != context.Canceled {
		return err
	}
	return nil
}

// take reserves up to batch events of the total; 0 when none are left.
func take(remaining *atomic.Int64, batch int) int {
	for {
		r := remaining.Load()
		if r <= 0 {
			return 0
		}
		n := min(int64(batch), r)
		if remaining.CompareAndSwap(r, r-n) {
			return int(n)
		}
	}
}

func (ws *writerSet) writer(ctx context.Context, w int, spec *writeSpec, start time.Time, remaining *atomic.Int64) error {
	conn, err := ws.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("writer %d: %w", w, err)
	}
	defer conn.Release()
	var interval time.Duration
	if spec.rate > 0 {
		interval = time.Duration(float64(spec.batch) * float64(spec.writers) / spec.rate * float64(time.Second))
	}
	// Writers start spread over one interval so their commits interleave.
	next := start.Add(interval * time.Duration(w) / time.Duration(spec.writers))
	entityID := fmt.Sprintf("bench-%s-%d", ws.runID, w)
	for {
		if ctx.Err() != nil {
			return nil
		}
		if !spec.until.IsZero() && !time.Now().Before(spec.until) {
			return nil
		}
		n := spec.batch
		if spec.total > 0 {
			if n = take(remaining, spec.batch); n == 0 {
				return nil
			}
		}
		if spec.gate != nil {
			gctx, cancel := ctx, context.CancelFunc(func() {})
			if !spec.until.IsZero() {
				gctx, cancel = context.WithDeadline(ctx, spec.until)
			}
			err := spec.gate(gctx)
			cancel()
			if err != nil {
				return nil
			}
		}
		intended := time.Now()
		if interval > 0 {
			if err := sleepUntil(ctx, next); err != nil {
				return nil
			}
			if time.Since(next) > interval {
				ws.behind.Add(1)
			}
			intended = next
			next = next.Add(interval)
		}
		t0 := nowNs()
		seqs, err := ws.insert(ctx, conn.Conn(), entityID, intended, w, spec.startNum[w], n)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("writer %d: %w", w, err)
		}
		done := nowNs()
		for _, s := range seqs {
			ws.commits.set(s, done)
		}
		ws.txLat.record(done - t0)
		spec.startNum[w] += int64(n)
		ws.events.Add(int64(len(seqs)))
		ws.txs.Add(1)
	}
}

// insert writes n events in one transaction and returns their seqs once
// the COMMIT has returned.
func (ws *writerSet) insert(ctx context.Context, conn *pgx.Conn, entityID string, intended time.Time, w int, num int64, n int) ([]int64, error) {
	args := []any{ws.project, ws.entityType, entityID, ws.entityKey, intended.UnixNano(), ws.runID, w, num, ws.pad, n}
	if !ws.cfg.explicitTx {
		// One statement is its own transaction: the rows are complete only
		// after the server's ReadyForQuery, i.e. after the commit.
		rows, err := conn.Query(ctx, insertSQL, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, insertSQL, args...)
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return seqs, tx.Commit(ctx)
}

// head returns the highest seq in the log.
func head(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var h int64
	if err := pool.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM events").Scan(&h); err != nil {
		return 0, fmt.Errorf("read the log head: %w", err)
	}
	return h, nil
}

// orderCheck is the result of reading the run's events back in seq order.
type orderCheck struct {
	rows       int64
	violations int64 // a writer's number not one past its previous, in seq order
	missing    int64 // committed seqs not found
	unexpected int64 // rows of this run the writers did not see committed
}

// verifyOrder reads back the run's events (seq > base ORDER BY seq) and
// checks that each writer's running numbers follow each other in seq
// order: commit order is seq order.
func (ws *writerSet) verifyOrder(ctx context.Context, base int64) (*orderCheck, error) {
	rows, err := ws.pool.Query(ctx, `SELECT seq, (payload->>'w')::int, (payload->>'i')::bigint FROM events
		WHERE seq > $1 AND project_key = $2 AND type = 'bench.event' AND payload->>'r' = $3 ORDER BY seq`,
		base, ws.project, ws.runID)
	if err != nil {
		return nil, fmt.Errorf("read back: %w", err)
	}
	defer rows.Close()
	oc := &orderCheck{}
	last := map[int]int64{}
	for rows.Next() {
		var seq, i int64
		var w int
		if err := rows.Scan(&seq, &w, &i); err != nil {
			return nil, fmt.Errorf("read back: %w", err)
		}
		oc.rows++
		if prev, ok := last[w]; (ok && i != prev+1) || (!ok && i != 0) {
			oc.violations++
		}
		last[w] = i
		if ws.commits.get(seq) == 0 {
			oc.unexpected++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read back: %w", err)
	}
	oc.missing = ws.commits.count.Load() - (oc.rows - oc.unexpected)
	return oc, nil
}
