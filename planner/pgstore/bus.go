package pgstore

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/pglisten"
	"github.com/ballet/gateway/internal/subscribers"
	"github.com/ballet/gateway/planner"
)

// DefaultChannel is the NOTIFY channel of the planner's bus.
const DefaultChannel = "ballet_planner"

// applicationName names the bus's listening connection in pg_stat_activity unless the pool's
// connection string sets application_name.
const applicationName = "ballet-gateway-planner-bus"

// Payload limits: a note whose JSON is longer than maxWhole is cut into fragments of
// fragmentData bytes, base64 in a small envelope.
const (
	maxWhole     = pglisten.MaxPayload
	fragmentData = 5000
	// maxFragments bounds a reassembled note (20 MB); maxPartial the notes being reassembled
	// at once; partialAge how long an incomplete one is kept.
	maxFragments = 4096
	maxPartial   = 64
	partialAge   = time.Minute
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

	subs subscribers.Set[planner.Note]

	partial map[string]*partial // listener goroutine only

	listener *pglisten.Listener
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
// reconnecting with backoff, until Close. After a reconnect it delivers a Note with Lost set.
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
		partial: map[string]*partial{},
	}
	var err error
	b.listener, err = pglisten.Open(ctx, pool.Config().ConnConfig, []string{o.Channel}, &pglisten.Options{
		ApplicationName: applicationName,
		OnNotify:        b.receive,
		OnReconnect:     b.reconnected,
		Logger:          o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: open bus: %w", err)
	}
	return b, nil
}

// Close stops the listener and waits for it. The pool stays open. Safe to call twice.
func (b *Bus) Close() error { return b.listener.Close() }

// ListenerPID is the backend pid of the listening connection, 0 while it is disconnected.
func (b *Bus) ListenerPID() int32 { return b.listener.PID() }

// Subscribe registers fn; it is called on the listener's goroutine.
func (b *Bus) Subscribe(fn func(planner.Note)) func() { return b.subs.Subscribe(fn) }

// Publish sends n with NOTIFY; it returns once the notification is committed.
func (b *Bus) Publish(ctx context.Context, n planner.Note) error {
	payloads, err := encodeNote(n)
	if err != nil {
		return fmt.Errorf("pgstore: publish: %w", err)
	}
	if err := pglisten.Notify(ctx, b.pool, b.channel, payloads...); err != nil {
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

// receive delivers the note a notification completes, if any.
func (b *Bus) receive(n *pgconn.Notification) {
	note, complete, err := b.decodePayload(n.Payload, time.Now())
	if err != nil {
		b.logger.Warn("pgstore: planner bus: malformed notification", "from_pid", n.PID, "err", err)
		return
	}
	if complete {
		note.Lost = false
		b.subs.Publish(note)
	}
}

// reconnected drops the fragments of notes that will not complete, and tells subscribers
// that notes may have been lost.
func (b *Bus) reconnected() {
	clear(b.partial)
	b.subs.Publish(planner.Note{Lost: true})
}
