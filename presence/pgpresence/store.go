package pgpresence

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/pglisten"
	"github.com/ballet/gateway/internal/subscribers"
	"github.com/ballet/gateway/presence"
)

// DefaultChannel is the NOTIFY channel of presence changes.
const DefaultChannel = "ballet_presence"

// DefaultTTL is how long a replica's row lives without a heartbeat: a replica that dies takes
// its members with it within TTL plus a heartbeat (TTL/5).
const DefaultTTL = 5 * time.Second

// applicationName names the listening connection in pg_stat_activity unless the pool's
// connection string sets application_name.
const applicationName = "ballet-gateway-presence"

// readBatch is the most streams read in one round trip.
const readBatch = 64

// Options configure Open. A nil *Options means defaults.
type Options struct {
	// Channel is the NOTIFY channel. Default DefaultChannel.
	Channel string
	// TTL: a replica whose row is older is gone. Default DefaultTTL; every replica must use
	// the same.
	TTL time.Duration
	// Logger receives heartbeat and listener errors. Default slog.Default().
	Logger *slog.Logger
	// ID is this replica's row in presence_replicas, unique among the live replicas and new
	// each start (the process's replica id). Default: 24 random hex digits.
	ID string
}

// Store is one replica's share of presence in Postgres. It is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	id      string
	channel string
	ttl     time.Duration
	logger  *slog.Logger

	mu      sync.Mutex  // serializes writes of this replica's rows
	mine    map[key]int // this replica's rows as last written
	failing bool        // the last heartbeat failed (logged once)
	subs    subscribers.Set[[]string]
	stop    context.CancelFunc
	done    chan struct{}
	once    sync.Once
	lsn     *pglisten.Listener
	unpack  pglisten.Unpacker // the listener goroutine's
}

var _ presence.Store = (*Store)(nil)

type key struct{ stream, subject string }

// Open registers this replica, starts its heartbeat and listens for other replicas' changes,
// until Close.
func Open(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Channel == "" {
		o.Channel = DefaultChannel
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ID == "" {
		var id [12]byte
		_, _ = crand.Read(id[:])
		o.ID = hex.EncodeToString(id[:])
	}
	s := &Store{
		pool: pool, id: o.ID, channel: o.Channel, ttl: o.TTL, logger: o.Logger,
		mine: map[key]int{}, done: make(chan struct{}),
	}
	if _, err := pool.Exec(ctx, `INSERT INTO presence_replicas (id) VALUES ($1)`, s.id); err != nil {
		return nil, fmt.Errorf("pgpresence: register replica: %w", err)
	}
	var err error
	s.lsn, err = pglisten.Open(ctx, pool.Config().ConnConfig, []string{s.channel}, &pglisten.Options{
		ApplicationName: applicationName,
		OnNotify:        s.receive,
		OnReconnect:     func() { s.unpack.Reset(); s.subs.Publish(nil) },
		Logger:          o.Logger,
	})
	if err != nil {
		_, _ = pool.Exec(context.WithoutCancel(ctx), `DELETE FROM presence_replicas WHERE id = $1`, s.id)
		return nil, fmt.Errorf("pgpresence: open: %w", err)
	}
	hctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.heartbeat(hctx)
	return s, nil
}

// ID is this replica's id in presence_replicas.
func (s *Store) ID() string { return s.id }

// closeTimeout bounds the removal of this replica's row and members at Close: one short
// transaction, bounded so that a database that does not answer does not hold up a shutdown
// (the other replicas drop the row anyway once its TTL passes without a heartbeat).
const closeTimeout = 5 * time.Second

// Close stops the heartbeat and the listener, and removes this replica's row and members,
// telling the other replicas. The pool stays open. Safe to call twice.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		s.stop()
		<-s.done
		_ = s.lsn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			return s.removeReplicas(ctx, tx, s.id, []string{s.id})
		})
		if err != nil {
			err = fmt.Errorf("pgpresence: close: %w", err)
		}
	})
	return err
}

// Subscribe registers fn for the streams other replicas changed (nil: any stream, after the
// listening connection was re-established); it is called on the listener's goroutine.
func (s *Store) Subscribe(fn func(streams []string)) func() { return s.subs.Subscribe(fn) }

// receive delivers the streams of another replica's notification (pglisten.Pack's, with the
// sender as head).
func (s *Store) receive(n *pgconn.Notification) {
	sender, streams, err := s.unpack.Unpack(n.Payload, time.Now())
	if err != nil || sender == s.id || len(streams) == 0 {
		return
	}
	s.subs.Publish(streams)
}

// notify announces, within tx, that streams changed; sender is the replica whose listener
// ignores it ("" for none). A long list of streams is cut into several notifications.
func (s *Store) notify(ctx context.Context, tx pgx.Tx, sender string, streams []string) error {
	slices.Sort(streams)
	payloads, err := pglisten.Pack(sender, slices.Compact(streams))
	if err != nil {
		return err
	}
	return pglisten.Notify(ctx, tx, s.channel, payloads...)
}

// Flush writes this replica's counts (0 removes a row) in one transaction, and notifies the
// streams where a subject appeared or vanished on this replica.
func (s *Store) Flush(ctx context.Context, counts []presence.Count) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.flushLocked(ctx, counts)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation: our row expired
		if err = s.rejoinLocked(ctx); err == nil {
			err = s.flushLocked(ctx, counts)
		}
	}
	if err != nil {
		return fmt.Errorf("pgpresence: flush: %w", err)
	}
	return nil
}

func (s *Store) flushLocked(ctx context.Context, counts []presence.Count) error {
	var upStreams, upSubjects, delStreams, delSubjects, changed []string
	var upConns []int32
	for _, c := range counts {
		had := s.mine[key{c.Stream, c.Subject}]
		switch {
		case c.Connections == had:
		case c.Connections > 0:
			upStreams, upSubjects = append(upStreams, c.Stream), append(upSubjects, c.Subject)
			upConns = append(upConns, int32(c.Connections))
			if had == 0 {
				changed = append(changed, c.Stream)
			}
		default:
			delStreams, delSubjects = append(delStreams, c.Stream), append(delSubjects, c.Subject)
			changed = append(changed, c.Stream)
		}
	}
	if len(upStreams)+len(delStreams) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if len(upStreams) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO presence_members (replica, stream, subject, connections)
				SELECT $1, t.stream, t.subject, t.connections
				FROM unnest($2::text[], $3::text[], $4::int[]) AS t(stream, subject, connections)
				ON CONFLICT (stream, subject, replica) DO UPDATE SET connections = EXCLUDED.connections`,
				s.id, upStreams, upSubjects, upConns); err != nil {
				return err
			}
		}
		if len(delStreams) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM presence_members m
				USING unnest($2::text[], $3::text[]) AS t(stream, subject)
				WHERE m.replica = $1 AND m.stream = t.stream AND m.subject = t.subject`,
				s.id, delStreams, delSubjects); err != nil {
				return err
			}
		}
		return s.notify(ctx, tx, s.id, changed)
	})
	if err != nil {
		return err
	}
	for _, c := range counts {
		if c.Connections > 0 {
			s.mine[key{c.Stream, c.Subject}] = c.Connections
		} else {
			delete(s.mine, key{c.Stream, c.Subject})
		}
	}
	return nil
}

// rejoinLocked writes this replica's row and all its members again, after another replica
// found the row expired and removed it, and notifies their streams.
func (s *Store) rejoinLocked(ctx context.Context) error {
	streams := make([]string, 0, len(s.mine))
	subjects := make([]string, 0, len(s.mine))
	conns := make([]int32, 0, len(s.mine))
	for k, n := range s.mine {
		streams, subjects, conns = append(streams, k.stream), append(subjects, k.subject), append(conns, int32(n))
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO presence_replicas (id) VALUES ($1)
			ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`, s.id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO presence_members (replica, stream, subject, connections)
			SELECT $1, t.stream, t.subject, t.connections
			FROM unnest($2::text[], $3::text[], $4::int[]) AS t(stream, subject, connections)
			ON CONFLICT (stream, subject, replica) DO UPDATE SET connections = EXCLUDED.connections`,
			s.id, streams, subjects, conns); err != nil {
			return err
		}
		return s.notify(ctx, tx, s.id, streams)
	})
	if err != nil {
		return fmt.Errorf("rejoin: %w", err)
	}
	s.logger.Warn("presence: this replica's row had expired; its members are written again", "replica", s.id, "members", len(s.mine))
	return nil
}

// Read returns, for each stream, the subjects present through the other live replicas, at
// most limit+1, the first in bytewise order, with their connections.
func (s *Store) Read(ctx context.Context, streams []string, limit int) (map[string]map[string]int, error) {
	out := make(map[string]map[string]int, len(streams))
	for len(streams) > 0 {
		chunk := streams[:min(len(streams), readBatch)]
		streams = streams[len(chunk):]
		b := &pgx.Batch{}
		for _, st := range chunk {
			b.Queue(`SELECT m.subject, sum(m.connections)::int
				FROM presence_members m JOIN presence_replicas r ON r.id = m.replica
				WHERE m.stream = $1 AND m.replica <> $2 AND r.heartbeat_at >= now() - make_interval(secs => $3)
				GROUP BY m.subject ORDER BY m.subject LIMIT $4`, st, s.id, s.ttl.Seconds(), limit+1)
		}
		err := func() error {
			br := s.pool.SendBatch(ctx, b)
			defer br.Close()
			for _, st := range chunk {
				rows, err := br.Query()
				if err != nil {
					return err
				}
				var subject string
				var n int
				members := map[string]int{}
				_, err = pgx.ForEachRow(rows, []any{&subject, &n}, func() error {
					members[subject] = n
					return nil
				})
				if err != nil {
					return err
				}
				out[st] = members
			}
			return br.Close()
		}()
		if err != nil {
			return nil, fmt.Errorf("pgpresence: read: %w", err)
		}
	}
	return out, nil
}

// heartbeat renews this replica's row every TTL/5 and removes the rows of replicas that
// stopped renewing theirs, until ctx ends.
func (s *Store) heartbeat(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.ttl / 5)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		bctx, cancel := context.WithTimeout(ctx, s.ttl/2)
		err := s.beat(bctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && !s.failing:
			s.failing = true
			s.logger.Warn("presence: heartbeat failed; other replicas drop this one's members after the TTL", "err", err, "ttl", s.ttl)
		case err == nil && s.failing:
			s.failing = false
			s.logger.Info("presence: heartbeat works again")
		}
	}
}

func (s *Store) beat(ctx context.Context) error {
	tag, err := s.pool.Exec(ctx, `UPDATE presence_replicas SET heartbeat_at = now() WHERE id = $1`, s.id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		s.mu.Lock()
		err := s.rejoinLocked(ctx)
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return s.sweep(ctx)
}

// sweep removes the replicas whose row expired, with their members, and notifies their
// streams to every replica, this one included. Replicas sweeping at once skip each other's
// rows.
func (s *Store) sweep(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM presence_replicas
			WHERE heartbeat_at < now() - make_interval(secs => $1) AND id <> $2
			FOR UPDATE SKIP LOCKED`, s.ttl.Seconds(), s.id)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return err
		}
		s.logger.Info("presence: removing replicas that stopped their heartbeat", "replicas", ids)
		return s.removeReplicas(ctx, tx, "", ids)
	})
}

// removeReplicas deletes replicas' rows and members and notifies their streams, as sender.
func (s *Store) removeReplicas(ctx context.Context, tx pgx.Tx, sender string, ids []string) error {
	rows, err := tx.Query(ctx, `SELECT DISTINCT stream FROM presence_members WHERE replica = ANY($1)`, ids)
	if err != nil {
		return err
	}
	streams, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM presence_replicas WHERE id = ANY($1)`, ids); err != nil {
		return err
	}
	return s.notify(ctx, tx, sender, streams)
}
