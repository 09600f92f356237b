package pgstore

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/planner"
)

// DefaultChannel is the NOTIFY channel of the planner's bus.
const DefaultChannel = "ballet_planner"

// Payload limits. NOTIFY refuses payloads of 8000 bytes or more; a note whose JSON is longer
// than maxWhole is cut into fragments of fragmentData bytes, base64 in a small envelope.
const (
	maxWhole     = 7000
	fragmentData = 5000
	// maxFragments bounds a reassembled note (20 MB); maxPartial the notes being reassembled
	// at once; partialAge how long an incomplete one is kept.
	maxFragments = 4096
	maxPartial   = 64
	partialAge   = time.Minute
)

const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
	// idlePing is how long the listener waits for a notification before checking that its
	// connection is alive.
	idlePing = 30 * time.Second
)

// BusOptions configure OpenBus. A nil *BusOptions means defaults.
type BusOptions struct {
	// Channel is the NOTIFY channel. Default DefaultChannel.
	Channel string
	// Logger receives listener connection errors. Default slog.Default().
	Logger *slog.Logger
}

// Bus is the planner's Bus over LISTEN/NOTIFY. It is safe for concurrent use.
type Bus struct {
	pool    *pgxpool.Pool
	channel string
	logger  *slog.Logger

	mu   sync.Mutex // held while subscribers are called
	subs map[int]func(planner.Note)
	next int

	partial map[string]*partial // listener goroutine only

	pid       atomic.Int32
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

var _ planner.Bus = (*Bus)(nil)

type partial struct {
	parts   [][]byte
	got     int
	started time.Time
}

// fragment is the envelope of a piece of a long note.
type fragment struct {
	ID    string `json:"frag"`
	Index int    `json:"i"`
	Count int    `json:"n"`
	Data  []byte `json:"d"`
}

// OpenBus opens the listening connection (an error then is returned) and keeps it open,
// reconnecting with backoff, until Close.
func OpenBus(ctx context.Context, pool *pgxpool.Pool, opts *BusOptions) (*Bus, error) {
	var o BusOptions
	if opts != nil {
		o = *opts
	}
	if o.Channel == "" {
		o.Channel = DefaultChannel
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	b := &Bus{
		pool: pool, channel: o.Channel, logger: o.Logger,
		subs: map[int]func(planner.Note){}, partial: map[string]*partial{}, done: make(chan struct{}),
	}
	conn, err := b.listen(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open bus: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go b.run(lctx, conn)
	return b, nil
}

// Close stops the listener and waits for it. The pool stays open. Safe to call twice.
func (b *Bus) Close() error {
	b.closeOnce.Do(func() {
		b.cancel()
		<-b.done
	})
	return nil
}

// ListenerPID is the backend pid of the listening connection, 0 while it is disconnected.
func (b *Bus) ListenerPID() int32 { return b.pid.Load() }

// Subscribe registers fn; it is called on the listener's goroutine.
func (b *Bus) Subscribe(fn func(planner.Note)) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.next
	b.next++
	b.subs[id] = fn
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.subs, id)
	}
}

// Publish sends n with NOTIFY; it returns once the notification is committed.
func (b *Bus) Publish(ctx context.Context, n planner.Note) error {
	payloads, err := encodeNote(n)
	if err != nil {
		return fmt.Errorf("pgstore: publish: %w", err)
	}
	if len(payloads) == 1 {
		_, err = b.pool.Exec(ctx, "SELECT pg_notify($1, $2)", b.channel, payloads[0])
	} else {
		// One transaction: its notifications are delivered together, in order.
		err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			for _, p := range payloads {
				if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", b.channel, p); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("pgstore: publish: %w", err)
	}
	return nil
}

// encodeNote returns the NOTIFY payloads of n: its JSON, or fragments of it.
func encodeNote(n planner.Note) ([]string, error) {
	data, err := json.Marshal(n)
	if err != nil {
		return nil, err
	}
	if len(data) <= maxWhole {
		return []string{string(data)}, nil
	}
	count := (len(data) + fragmentData - 1) / fragmentData
	if count > maxFragments {
		return nil, fmt.Errorf("note of %d bytes is too long", len(data))
	}
	var id [12]byte
	_, _ = crand.Read(id[:])
	f := fragment{ID: hex.EncodeToString(id[:]), Count: count}
	out := make([]string, 0, count)
	for i := 0; i < count; i++ {
		f.Index, f.Data = i, data[i*fragmentData:min(len(data), (i+1)*fragmentData)]
		p, err := json.Marshal(f)
		if err != nil {
			return nil, err
		}
		out = append(out, string(p))
	}
	return out, nil
}

// decodePayload reads one notification: a whole note (complete true), or a fragment, which
// completes a note once all its fragments arrived. Malformed payloads are errors.
func (b *Bus) decodePayload(payload string, now time.Time) (planner.Note, bool, error) {
	var f fragment
	if err := json.Unmarshal([]byte(payload), &f); err != nil {
		return planner.Note{}, false, err
	}
	if f.ID == "" {
		return decodeNote([]byte(payload))
	}
	if f.Count < 1 || f.Count > maxFragments || f.Index < 0 || f.Index >= f.Count {
		return planner.Note{}, false, fmt.Errorf("fragment %d of %d", f.Index, f.Count)
	}
	p := b.partial[f.ID]
	if p == nil {
		b.prune(now)
		p = &partial{parts: make([][]byte, f.Count), started: now}
		b.partial[f.ID] = p
	}
	if len(p.parts) != f.Count {
		delete(b.partial, f.ID)
		return planner.Note{}, false, errors.New("fragments disagree on their count")
	}
	if p.parts[f.Index] == nil {
		p.got++
	}
	p.parts[f.Index] = f.Data
	if p.got < f.Count {
		return planner.Note{}, false, nil
	}
	delete(b.partial, f.ID)
	var whole []byte
	for _, part := range p.parts {
		whole = append(whole, part...)
	}
	return decodeNote(whole)
}

func decodeNote(data []byte) (planner.Note, bool, error) {
	var n planner.Note
	if err := json.Unmarshal(data, &n); err != nil {
		return planner.Note{}, false, err
	}
	return n, true, nil
}

// prune drops incomplete notes that are too old, then the oldest while there are too many.
func (b *Bus) prune(now time.Time) {
	for id, p := range b.partial {
		if now.Sub(p.started) > partialAge {
			delete(b.partial, id)
		}
	}
	for len(b.partial) >= maxPartial {
		var oldest string
		for id, p := range b.partial {
			if oldest == "" || p.started.Before(b.partial[oldest].started) {
				oldest = id
			}
		}
		delete(b.partial, oldest)
	}
}

// deliver calls every subscriber with n.
func (b *Bus) deliver(n planner.Note) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, fn := range b.subs {
		fn(n)
	}
}

// listen opens a dedicated connection with the pool's settings and LISTENs on the channel.
func (b *Bus) listen(ctx context.Context) (*pgx.Conn, error) {
	cfg := b.pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "ballet-gateway-planner-bus"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("listener connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("listen %s: %w", b.channel, err)
	}
	b.pid.Store(int32(conn.PgConn().PID()))
	return conn, nil
}

// run owns the listening connection: it delivers notes, and replaces the connection when it
// is lost, then delivers a Lost note.
func (b *Bus) run(ctx context.Context, conn *pgx.Conn) {
	defer close(b.done)
	backoff := backoffMin
	for {
		if conn != nil {
			err := b.receive(ctx, conn)
			b.pid.Store(0)
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
			conn = nil
			clear(b.partial)
			if ctx.Err() != nil {
				return
			}
			b.logger.Warn("pgstore: planner bus connection lost; reconnecting", "err", err)
		}
		if !sleep(ctx, jitter(backoff)) {
			return
		}
		var err error
		if conn, err = b.listen(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			b.logger.Warn("pgstore: planner bus reconnect failed", "err", err, "retry_in", backoff)
			backoff = min(2*backoff, backoffMax)
			continue
		}
		b.logger.Info("pgstore: planner bus reconnected")
		backoff = backoffMin
		b.deliver(planner.Note{Lost: true})
	}
}

// receive delivers notifications until the connection fails or ctx ends.
func (b *Bus) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, idlePing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			note, complete, err := b.decodePayload(n.Payload, time.Now())
			if err != nil {
				b.logger.Warn("pgstore: planner bus: malformed notification", "from_pid", n.PID, "err", err)
				continue
			}
			if complete {
				note.Lost = false
				b.deliver(note)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
			if conn.IsClosed() {
				return err
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("listener ping: %w", err)
			}
		default:
			return err
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// jitter returns d ± 20%.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}
