package pglog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/streams"
)

// Reading a standby (Options.Tail).
//
// Commit order holds there: a standby applies commit records in WAL order, and seq is drawn in
// commit order on the primary, so every snapshot of the standby holds a prefix of the log. The
// tailer's "seq > position" reads stay gap-free. What a standby adds is delay, and, behind a
// pooler in front of several standbys or right after a standby restarts (it opens for reads
// at its last restart point, before it has replayed again what it had shown), reads that go
// back in time. So a replay read checks, in the same snapshot, that the copy holds every event
// up to the end of its range, and waits for it if not: it never returns a range with a hole.
//
// NOTIFY does not reach standbys. Wait polls the standby's head, every TailPoll while events
// arrive and every TailIdlePoll once none has for a second, and the log keeps no connection on
// the primary for it. (Using the primary's NOTIFY as a hint to poll the standby until it caught
// up was measured too: it holds the same latency but costs the primary a woken listening backend
// per replica and commit; docs/benchmarks.md.)

const (
	// busyFor is how long after the last event Wait keeps polling the standby every TailPoll.
	busyFor = time.Second
	// holeWait bounds how long a replay read waits for a copy that is behind its range.
	holeWait = 5 * time.Second
	// lagProbeEvery is how often the standby's lag is measured.
	lagProbeEvery = time.Second
	// lagProbeTimeout bounds one measure of the lag, a single query to the standby: twice
	// lagProbeEvery, so that a standby that does not answer leaves the lag unknown after a
	// missed probe or two rather than holding the probe loop.
	lagProbeTimeout = 2 * time.Second
)

// ErrTailBehind: the standby had not replayed up to the end of a replay's range in time.
var ErrTailBehind = errors.New("pglog: the standby is behind the range to read")

// tail is the state of reading a standby.
type tail struct {
	pool     *pgxpool.Pool // the standby
	primary  *pgxpool.Pool
	poll     time.Duration
	idlePoll time.Duration
	// lastEvent is when Wait last found events (unix ns), for the adaptive poll.
	lastEvent atomic.Int64

	lag    lagState
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func openTail(ctx context.Context, primary, pool *pgxpool.Pool, o *Options) (*tail, error) {
	t := &tail{pool: pool, primary: primary, poll: o.TailPoll, idlePoll: o.TailIdlePoll, done: make(chan struct{})}
	if t.poll <= 0 {
		t.poll = 2 * time.Millisecond
	}
	if t.idlePoll <= 0 {
		t.idlePoll = 20 * time.Millisecond
	}
	if t.idlePoll < t.poll {
		t.idlePoll = t.poll
	}
	t.lag.init(time.Now())
	if err := t.probeLag(ctx); err != nil {
		return nil, fmt.Errorf("pglog: tail: %w", err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	go t.probeLoop(pctx)
	return t, nil
}

func (t *tail) close() {
	t.once.Do(func() {
		t.cancel()
		<-t.done
	})
}

// interval is the time to the next poll of the standby while Wait has no notification.
func (t *tail) interval(now time.Time) time.Duration {
	if now.UnixNano()-t.lastEvent.Load() < int64(busyFor) {
		return t.poll
	}
	return t.idlePoll
}

// behind reports whether the standby has events after `after`, or cannot say.
func (t *tail) behind(ctx context.Context, after int64) bool {
	var head int64
	err := t.pool.QueryRow(ctx, headQuery).Scan(&head)
	if err == nil && head > after {
		t.lastEvent.Store(time.Now().UnixNano())
	}
	return err != nil || head > after
}

const tailStreamColumns = "seq, project_key, type, entity_type, entity_id, coalesce(entity_key, '') AS entity_key, occurred_at, actor_kind, actor_subject, payload::text AS payload"

// readStream reads the stream's events in (after, upto] from the standby, together with the
// standby's head in the same snapshot. While that head is below both upto and the primary's
// head, the range may have a hole, so it reads again, for at most holeWait (then ErrTailBehind).
func (t *tail) readStream(ctx context.Context, where, key string, after, upto int64, limit int) ([]streams.Event, error) {
	q := "SELECT h.head, e.seq, e.project_key, e.type, e.entity_type, e.entity_id, e.entity_key, e.occurred_at, e.actor_kind, e.actor_subject, e.payload" +
		" FROM (SELECT coalesce(max(seq), 0) AS head FROM events) h LEFT JOIN LATERAL (SELECT " + tailStreamColumns + " FROM events WHERE " + where +
		" AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4) e ON true ORDER BY e.seq"
	deadline := time.Now().Add(holeWait)
	for {
		evs, head, err := t.readWithHead(ctx, q, key, after, upto, limit)
		if err != nil || head >= upto || len(evs) >= limit {
			return evs, err
		}
		// The primary's head bounds what can be missing: a range beyond it holds nothing more.
		var primary int64
		if err := t.primary.QueryRow(ctx, headQuery).Scan(&primary); err != nil {
			return nil, fmt.Errorf("primary head: %w", err)
		}
		if head >= min(upto, primary) {
			return evs, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("replay up to seq %d: the standby has replayed up to %d: %w", upto, head, ErrTailBehind)
		}
		timer := time.NewTimer(t.poll)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}
}

func (t *tail) readWithHead(ctx context.Context, q, key string, after, upto int64, limit int) ([]streams.Event, int64, error) {
	rows, err := t.pool.Query(ctx, q, key, after, upto, limit)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var evs []streams.Event
	var head int64
	for rows.Next() {
		var (
			seq                                             pgtype.Int8
			project, typ, etype, eid, ekey, akind, asub, pl pgtype.Text
			at                                              pgtype.Timestamptz
		)
		if err := rows.Scan(&head, &seq, &project, &typ, &etype, &eid, &ekey, &at, &akind, &asub, &pl); err != nil {
			return nil, 0, err
		}
		if !seq.Valid {
			continue // the stream has no event in the range: the row only carries the head
		}
		evs = append(evs, streams.Event{
			Seq: seq.Int64, ProjectKey: project.String, Type: typ.String, EntityType: etype.String, EntityID: eid.String,
			EntityKey: ekey.String, OccurredAt: at.Time.UTC(), ActorKind: akind.String, ActorSubject: asub.String,
			Payload: []byte(pl.String),
		})
	}
	return evs, head, rows.Err()
}
