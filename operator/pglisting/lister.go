// Package pglisting gathers operators' listings of connections from every live replica
// through Postgres (migration 0010_connection_listings): replicas need not reach each other,
// only the database.
//
// A listing inserts its row and sends NOTIFY "ask" on Options.Channel; every replica that
// listens answers on a goroutine of its own (at most MaxListings at once; one more is not
// answered), writing its connections as one row and sending NOTIFY "answer". The asker waits
// for the replicas of presence_replicas, at most operator.ListWait, then reads the answers and
// deletes its listing with them. A replica that did not answer in time is listed with
// answered false. A replica whose listening connection was lost answers, once it is back, the
// listings asked meanwhile that are still waiting (migration 0014). A Lister without a Source only asks: the command line.
package pglisting

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/pglisten"
	"github.com/ballet/gateway/operator"
)

// DefaultChannel is the NOTIFY channel of listings.
const DefaultChannel = "ballet_connection_listings"

// applicationName names the listening connection in pg_stat_activity unless the pool's
// connection string sets application_name.
const applicationName = "ballet-gateway-listings"

// staleAfter is the age past which a listing's row belongs to an asker that died.
const staleAfter = time.Minute

// Notification kinds, the first line of the payload.
const (
	kindAsk    = "ask"
	kindAnswer = "answer"
)

// Options configure Open. A nil *Options means defaults and a Lister that only asks.
type Options struct {
	operator.ListOptions
	// Replica is this replica's id in presence_replicas, and Source its connections: with
	// both, the Lister answers listings.
	Replica string
	Source  operator.Source
	// Channel is the NOTIFY channel. Default DefaultChannel.
	Channel string
	// Logger receives the answers that failed. Default slog.Default().
	Logger *slog.Logger
}

// Lister asks and answers listings. It is safe for concurrent use.
type Lister struct {
	pool    *pgxpool.Pool
	o       Options
	asks    operator.Gate
	answers operator.Gate
	lsn     *pglisten.Listener

	ctx    context.Context // ends at Close: the answers in progress give up
	cancel context.CancelFunc
	wg     sync.WaitGroup // the answers in progress

	mu    sync.Mutex
	waits map[string]*wait // the listings this Lister asked, by id
}

var _ operator.Lister = (*Lister)(nil)

// wait is a listing waiting for its replicas' answers (guarded by Lister.mu).
type wait struct {
	pending map[string]bool
	done    chan struct{} // closed once pending is empty
}

// Open listens for listings until Close.
func Open(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Lister, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.ListOptions = o.ListOptions.WithDefaults()
	if o.Channel == "" {
		o.Channel = DefaultChannel
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if (o.Source == nil) != (o.Replica == "") {
		return nil, errors.New("pglisting: Replica and Source go together")
	}
	l := &Lister{pool: pool, o: o, asks: operator.NewGate(o.MaxListings), answers: operator.NewGate(o.MaxListings),
		waits: map[string]*wait{}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	var err error
	lo := &pglisten.Options{ApplicationName: applicationName, OnNotify: l.receive, Logger: o.Logger}
	if o.Source != nil {
		lo.OnReconnect = l.catchUp
	}
	l.lsn, err = pglisten.Open(ctx, pool.Config().ConnConfig, []string{o.Channel}, lo)
	if err != nil {
		l.cancel()
		return nil, fmt.Errorf("pglisting: open: %w", err)
	}
	return l, nil
}

// Close stops listening and waits for the answers in progress, which give up. Safe to call
// twice.
func (l *Lister) Close() error {
	l.cancel()
	_ = l.lsn.Close() // no answer starts after it
	l.wg.Wait()
	return nil
}

// receive handles a notification on the listener's goroutine: it never waits.
func (l *Lister) receive(n *pgconn.Notification) {
	kind, rest, _ := strings.Cut(n.Payload, "\n")
	id, rest, _ := strings.Cut(rest, "\n")
	switch kind {
	case kindAsk:
		if l.o.Source == nil {
			return
		}
		limitText, subject, _ := strings.Cut(rest, "\n")
		limit, err := strconv.Atoi(limitText)
		if err != nil {
			return
		}
		l.goAnswer(id, subject, limit)
	case kindAnswer:
		l.mu.Lock()
		defer l.mu.Unlock()
		if w := l.waits[id]; w != nil && w.pending[rest] {
			delete(w.pending, rest)
			if len(w.pending) == 0 {
				close(w.done)
			}
		}
	}
}

// goAnswer answers listing id on a goroutine of its own, unless MaxListings answers are in
// progress.
func (l *Lister) goAnswer(id, subject string, limit int) {
	if limit < 1 || limit > operator.MaxListLimit {
		return
	}
	if !l.answers.Enter() {
		l.o.Observe(operator.ListingBusy)
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer l.answers.Leave()
		l.answer(id, subject, limit)
	}()
}

// catchUp answers, once the listening connection is back, the listings asked while it was
// lost: those still waiting for their answers (asked within operator.ListWait) that this
// replica has not answered. It runs on the listener's goroutine, before the notifications that
// arrive after the reconnect: a listing asked meanwhile may be answered twice, and its second
// answer is refused by the answers' key.
func (l *Lister) catchUp() {
	ctx, cancel := context.WithTimeout(l.ctx, operator.ListWait)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT id, subject, max_connections FROM connection_listings l
		WHERE asked_at > now() - make_interval(secs => $1)
		  AND NOT EXISTS (SELECT 1 FROM connection_listing_answers a WHERE a.listing = l.id AND a.replica = $2)`,
		operator.ListWait.Seconds(), l.o.Replica)
	if err != nil {
		if l.ctx.Err() == nil {
			l.o.Logger.Warn("connection listing: the listings asked while the listener reconnected could not be read", "err", err)
		}
		return
	}
	type missed struct {
		id, subject string
		limit       int
	}
	var ms []missed
	var m missed
	_, err = pgx.ForEachRow(rows, []any{&m.id, &m.subject, &m.limit}, func() error {
		ms = append(ms, m)
		return nil
	})
	if err != nil {
		return
	}
	for _, m := range ms {
		l.goAnswer(m.id, m.subject, m.limit)
	}
}

// answer writes this replica's answer to listing id and tells the asker.
func (l *Lister) answer(id, subject string, limit int) {
	conns, truncated := operator.Answer(l.o.Source, l.o.Replica, subject, limit)
	body, err := json.Marshal(conns)
	if err == nil {
		ctx, cancel := context.WithTimeout(l.ctx, operator.ListWait)
		err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO connection_listing_answers (listing, replica, truncated, connections)
				VALUES ($1, $2, $3, $4)`, id, l.o.Replica, truncated, body); err != nil {
				return err
			}
			return pglisten.Notify(ctx, tx, l.o.Channel, kindAnswer+"\n"+id+"\n"+l.o.Replica)
		})
		cancel()
	}
	if err != nil {
		l.o.Observe(operator.ListingFailed)
		var pgErr *pgconn.PgError
		if l.ctx.Err() == nil && (!errors.As(err, &pgErr) || pgErr.Code != "23503") { // foreign_key_violation: the asker gave up
			l.o.Logger.Warn("connection listing: the answer could not be written", "listing", id, "err", err)
		}
		return
	}
	l.o.Observe(operator.ListingAnswered)
}

// List asks every live replica for its connections of subject ("" for all), at most limit,
// and gathers what they answer within operator.ListWait. Past MaxListings listings in
// progress it refuses with operator.Busy.
func (l *Lister) List(ctx context.Context, subject string, limit int) (*operator.Listing, error) {
	if !l.asks.Enter() {
		l.o.Observe(operator.ListingRefused)
		return nil, operator.Busy(l.o.MaxListings)
	}
	defer l.asks.Leave()
	id := newID()
	w := &wait{done: make(chan struct{})}
	defer func() {
		l.mu.Lock()
		delete(l.waits, id)
		l.mu.Unlock()
	}()
	var expected []string
	actx, cancel := context.WithTimeout(ctx, operator.ListWait)
	err := pgx.BeginFunc(actx, l.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(actx, `DELETE FROM connection_listings WHERE asked_at < now() - make_interval(secs => $1)`,
			staleAfter.Seconds()); err != nil {
			return err
		}
		if _, err := tx.Exec(actx, `INSERT INTO connection_listings (id, max_connections, subject) VALUES ($1, $2, $3)`,
			id, limit, subject); err != nil {
			return err
		}
		rows, err := tx.Query(actx, `SELECT id FROM presence_replicas ORDER BY id`)
		if err != nil {
			return err
		}
		if expected, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		// Answers come once this commits: the wait is registered before.
		l.mu.Lock()
		w.pending = map[string]bool{}
		for _, r := range expected {
			w.pending[r] = true
		}
		if len(w.pending) == 0 {
			close(w.done)
		}
		l.waits[id] = w
		l.mu.Unlock()
		return pglisten.Notify(actx, tx, l.o.Channel, kindAsk+"\n"+id+"\n"+strconv.Itoa(limit)+"\n"+subject)
	})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("pglisting: ask: %w", err)
	}
	l.o.Observe(operator.ListingAsked)
	t := time.NewTimer(operator.ListWait)
	select {
	case <-w.done:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	// The answers are read, and the listing removed, even when the caller went away.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), operator.ListWait)
	defer cancel()
	return l.gather(rctx, id, expected, limit)
}

// gather reads listing id's answers, removes it with them, and puts the listing together.
func (l *Lister) gather(ctx context.Context, id string, expected []string, limit int) (*operator.Listing, error) {
	answered := map[string]bool{}
	var all []operator.Connection
	truncated := false
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM connection_listing_answers WHERE listing = $1
			RETURNING replica, truncated, connections`, id)
		if err != nil {
			return err
		}
		var replica string
		var cut bool
		var body []byte
		_, err = pgx.ForEachRow(rows, []any{&replica, &cut, &body}, func() error {
			var conns []operator.Connection
			if err := json.Unmarshal(body, &conns); err != nil {
				return fmt.Errorf("the answer of replica %s: %w", replica, err)
			}
			answered[replica], truncated = true, truncated || cut
			all = append(all, conns...)
			return nil
		})
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM connection_listings WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pglisting: gather: %w", err)
	}
	out := &operator.Listing{Replicas: []operator.ReplicaAnswer{}}
	replicas := slices.Concat(expected, slices.Collect(maps.Keys(answered)))
	slices.Sort(replicas)
	for _, r := range slices.Compact(replicas) {
		out.Replicas = append(out.Replicas, operator.ReplicaAnswer{Replica: r, Answered: answered[r]})
	}
	var cut bool
	out.Connections, cut = operator.Fit(all, limit)
	out.Truncated = truncated || cut
	if out.Connections == nil {
		out.Connections = []operator.Connection{}
	}
	return out, nil
}

// newID is a listing's random id.
func newID() string {
	var b [12]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
