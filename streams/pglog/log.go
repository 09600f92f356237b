package pglog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/pglisten"
	"github.com/ballet/gateway/streams"
)

// applicationName names the LISTEN connection in pg_stat_activity unless the pool's
// connection string sets application_name.
const applicationName = "ballet-gateway-event-listener"

// Options configure a Log. The zero value (or nil) means defaults.
type Options struct {
	// PollInterval is how often Wait checks the log without a notification: the safety net for
	// lost notifications. Default 1s.
	PollInterval time.Duration
	// Logger receives listener connection errors. Default slog.Default().
	Logger *slog.Logger
	// Channel is the NOTIFY channel of the insert trigger. Default "ballet_events".
	Channel string
	// Tail, when set, is a pool on a streaming hot standby of the pool's database (or on a
	// pooler in front of several): Head, ReadAfter, ReadStream and Wait read there, while
	// appends, projects, members and PrimaryHead stay on the pool, and nothing listens on the
	// primary (Wait polls the standby). See tail.go.
	Tail *pgxpool.Pool
	// TailPoll is the interval at which Wait polls Tail while events arrive. Default 2ms.
	TailPoll time.Duration
	// TailIdlePoll is the interval at which Wait polls Tail once no event has arrived for a
	// second. Default 20ms.
	TailIdlePoll time.Duration
}

// Log is the event log in Postgres.
type Log struct {
	pool *pgxpool.Pool // the primary: writes and PrimaryHead
	read *pgxpool.Pool // Tail when set, else pool
	poll time.Duration
	tail *tail // nil without Tail

	mu     sync.Mutex
	wakeCh chan struct{} // closed and replaced on every wake-up

	listener  *pglisten.Listener
	closed    chan struct{}
	closeOnce sync.Once
}

var (
	_ streams.Log          = (*Log)(nil)
	_ streams.Appender     = (*Log)(nil)
	_ streams.ProjectStore = (*Log)(nil)
	_ streams.Follower     = (*Log)(nil)
)

// Open returns a Log on pool. It opens the LISTEN connection before returning (an error then
// is returned) and keeps it open, reconnecting with backoff, until Close.
func Open(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Log, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.Channel == "" {
		o.Channel = "ballet_events"
	}
	l := &Log{
		pool:   pool,
		read:   pool,
		poll:   o.PollInterval,
		wakeCh: make(chan struct{}),
		closed: make(chan struct{}),
	}
	if o.Tail != nil {
		var err error
		if l.tail, err = openTail(ctx, pool, o.Tail, &o); err != nil {
			return nil, err
		}
		l.read = o.Tail
		return l, nil // nothing listens on the primary
	}
	// Every notification is a wake-up; so is a reconnect, since notifications sent while no
	// connection listened are gone.
	var err error
	l.listener, err = pglisten.Open(ctx, pool.Config().ConnConfig, []string{o.Channel}, &pglisten.Options{
		ApplicationName: applicationName,
		OnNotify:        func(*pgconn.Notification) { l.wake() },
		OnReconnect:     l.wake,
		Logger:          o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("pglog: open: %w", err)
	}
	return l, nil
}

// Close stops the listener and waits for it; blocked Waits return streams.ErrClosed. The pool
// stays open. Safe to call twice.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		if l.listener != nil {
			l.listener.Close()
		}
		if l.tail != nil {
			l.tail.close()
		}
	})
	return nil
}

// ListenerPID is the backend pid of the LISTEN connection, 0 while it is disconnected or when
// nothing listens (a Tail polled without notifications).
func (l *Log) ListenerPID() int32 {
	if l.listener == nil {
		return 0
	}
	return l.listener.PID()
}

const headQuery = "SELECT coalesce(max(seq), 0) FROM events"

// Head returns the highest committed seq, 0 for an empty log: on Tail when set (the highest seq
// the standby has replayed).
func (l *Log) Head(ctx context.Context) (int64, error) {
	var head int64
	if err := l.read.QueryRow(ctx, headQuery).Scan(&head); err != nil {
		return 0, fmt.Errorf("pglog: head: %w", err)
	}
	return head, nil
}

// PrimaryHead returns the highest seq committed on the primary (streams.Follower).
func (l *Log) PrimaryHead(ctx context.Context) (int64, error) {
	var head int64
	if err := l.pool.QueryRow(ctx, headQuery).Scan(&head); err != nil {
		return 0, fmt.Errorf("pglog: primary head: %w", err)
	}
	return head, nil
}

const eventColumns = "seq, project_key, type, entity_type, entity_id, coalesce(entity_key, ''), occurred_at, actor_kind, actor_subject, payload::text"

// ReadAfter returns at most limit events with seq > after, in seq order.
func (l *Log) ReadAfter(ctx context.Context, after int64, limit int) ([]streams.Event, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("pglog: read after %d: limit %d: %w", after, limit, streams.ErrInvalid)
	}
	evs, err := l.query(ctx, l.read, "SELECT "+eventColumns+" FROM events WHERE seq > $1 ORDER BY seq LIMIT $2", after, limit)
	if err != nil {
		return nil, fmt.Errorf("pglog: read after %d: %w", after, err)
	}
	return evs, nil
}

// ReadStream returns at most limit events of s with after < seq <= upto, in seq order.
func (l *Log) ReadStream(ctx context.Context, s streams.Stream, after, upto int64, limit int) ([]streams.Event, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("pglog: read %s: limit %d: %w", s, limit, streams.ErrInvalid)
	}
	where, ok := streamWhere(s)
	if !ok {
		return nil, fmt.Errorf("pglog: read %s: %w", s, streams.ErrBadStream)
	}
	if upto <= after {
		return nil, nil
	}
	var evs []streams.Event
	var err error
	if l.tail != nil {
		evs, err = l.tail.readStream(ctx, where, s.Key, after, upto, limit)
	} else {
		evs, err = l.query(ctx, l.pool, "SELECT "+eventColumns+" FROM events WHERE "+where+
			" AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4", s.Key, after, upto, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("pglog: read %s: %w", s, err)
	}
	return evs, nil
}

// streamWhere is the condition on events of stream s, its key the query's $1.
func streamWhere(s streams.Stream) (string, bool) {
	switch s.Kind {
	case streams.StreamProject:
		return "project_key = $1", true
	case streams.StreamItem:
		return "entity_type = 'item' AND entity_key = $1", true
	}
	return "", false
}

// CountStream counts the stream's events with after < seq <= upto, at most limit of them
// (streams.Counter), on the database ReadStream reads.
func (l *Log) CountStream(ctx context.Context, s streams.Stream, after, upto int64, limit int) (int, error) {
	where, ok := streamWhere(s)
	if !ok {
		return 0, fmt.Errorf("pglog: count %s: %w", s, streams.ErrBadStream)
	}
	if upto <= after || limit <= 0 {
		return 0, nil
	}
	pool := l.pool
	if l.tail != nil {
		pool = l.tail.pool
	}
	var n int
	err := pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM events WHERE "+where+
		" AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4) e", s.Key, after, upto, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pglog: count %s: %w", s, err)
	}
	return n, nil
}

func (l *Log) query(ctx context.Context, pool *pgxpool.Pool, q string, args ...any) ([]streams.Event, error) {
	rows, err := pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var evs []streams.Event
	for rows.Next() {
		var e streams.Event
		var payload string
		if err := rows.Scan(&e.Seq, &e.ProjectKey, &e.Type, &e.EntityType, &e.EntityID, &e.EntityKey,
			&e.OccurredAt, &e.ActorKind, &e.ActorSubject, &payload); err != nil {
			return nil, err
		}
		e.OccurredAt = e.OccurredAt.UTC()
		e.Payload = []byte(payload)
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return evs, nil
}

// Append inserts evs in one transaction, in the given order, and returns the last seq.
func (l *Log) Append(ctx context.Context, evs ...streams.NewEvent) (int64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	if err := validate(evs); err != nil {
		return 0, fmt.Errorf("pglog: append: %w", err)
	}
	var last int64
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var err error
		last, err = insertEvents(ctx, tx, evs)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pglog: append: %w", err)
	}
	return last, nil
}

// Insert validates evs and appends them inside tx, in the given order, with one statement,
// and returns the last seq (0 for none). It is how a store changes its tables and the log in
// one transaction; call it late there, since it takes the log's commit-order lock until
// commit. Its errors are Validate's and the statement's, unwrapped: the caller says what
// failed.
func Insert(ctx context.Context, tx pgx.Tx, evs ...streams.NewEvent) (int64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	if err := validate(evs); err != nil {
		return 0, err
	}
	return insertEvents(ctx, tx, evs)
}

func validate(evs []streams.NewEvent) error {
	for i := range evs {
		if err := evs[i].Validate(); err != nil {
			return err
		}
	}
	return nil
}

// insertEvents appends evs, validated already and at least one, inside tx. One event goes
// in with VALUES, which Postgres plans and runs faster than the arrays that carry several.
func insertEvents(ctx context.Context, tx pgx.Tx, evs []streams.NewEvent) (int64, error) {
	n := len(evs)
	var last int64
	if n == 1 {
		e := &evs[0]
		err := tx.QueryRow(ctx, `INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, occurred_at, actor_kind, actor_subject, payload)
			VALUES ($1, $2, $3, $4, $5, coalesce($6, now()), $7, $8, $9::jsonb) RETURNING seq`,
			e.ProjectKey, e.Type, e.EntityType, e.EntityID, pgtype.Text{String: e.EntityKey, Valid: e.EntityKey != ""},
			pgtype.Timestamptz{Time: e.OccurredAt, Valid: !e.OccurredAt.IsZero()}, e.ActorKind, e.ActorSubject,
			string(e.PayloadOrEmpty())).Scan(&last)
		return last, err
	}
	var (
		project, typ, etype, eid, actorKind, actorSubject, payload = make([]string, n), make([]string, n),
			make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		ekey = make([]pgtype.Text, n)
		at   = make([]pgtype.Timestamptz, n)
	)
	for i := range evs {
		e := &evs[i]
		project[i], typ[i], etype[i], eid[i] = e.ProjectKey, e.Type, e.EntityType, e.EntityID
		actorKind[i], actorSubject[i], payload[i] = e.ActorKind, e.ActorSubject, string(e.PayloadOrEmpty())
		ekey[i] = pgtype.Text{String: e.EntityKey, Valid: e.EntityKey != ""}
		at[i] = pgtype.Timestamptz{Time: e.OccurredAt, Valid: !e.OccurredAt.IsZero()}
	}
	err := tx.QueryRow(ctx, `WITH ins AS (
		INSERT INTO events (project_key, type, entity_type, entity_id, entity_key, occurred_at, actor_kind, actor_subject, payload)
		SELECT p, t, et, ei, ek, coalesce(oa, now()), ak, asub, pl::jsonb
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[], $8::text[], $9::text[])
			WITH ORDINALITY AS u(p, t, et, ei, ek, oa, ak, asub, pl, ord)
		ORDER BY ord
		RETURNING seq)
	SELECT max(seq) FROM ins`,
		project, typ, etype, eid, ekey, at, actorKind, actorSubject, payload).Scan(&last)
	if err != nil {
		return 0, err
	}
	return last, nil
}
