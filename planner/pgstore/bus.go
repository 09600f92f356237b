package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/jsonscan"
	"github.com/ballet/gateway/internal/pglisten"
	"github.com/ballet/gateway/internal/subscribers"
	"github.com/ballet/gateway/planner"
)

// DefaultChannel is the NOTIFY channel of the planner's bus.
const DefaultChannel = "ballet_planner"

// applicationName names the bus's listening connection in pg_stat_activity unless the pool's
// connection string sets application_name.
const applicationName = "ballet-gateway-planner-bus"

// BusOptions configure OpenBus. A nil *BusOptions means defaults.
type BusOptions struct {
	// Channel is the NOTIFY channel. Default DefaultChannel.
	Channel string
	// Logger receives listener connection errors. Default slog.Default().
	Logger *slog.Logger
}

// Bus is the planner's Bus over LISTEN/NOTIFY. It is safe for concurrent use. Notes travel
// as pglisten.Pack's items, one a note, "<session> <note JSON>" (the session empty for notes
// of none), so that a subscriber that does not want a session's notes skips them unread.
type Bus struct {
	pool    *pgxpool.Pool
	channel string
	logger  *slog.Logger

	subs subscribers.Set[*item]

	unpack   pglisten.Unpacker // the listener goroutine's
	listener *pglisten.Listener
}

var _ planner.Bus = (*Bus)(nil)

// item is a received note, decoded once by the first subscriber that wants it.
type item struct {
	session string
	data    string
	output  bool          // the note carries an output
	note    *planner.Note // decoded; nil before
	err     error
}

func (it *item) decode() (planner.Note, error) {
	if it.note == nil && it.err == nil {
		var n planner.Note
		if n, it.err = decodeNote(it.data); it.err == nil {
			it.note = &n
		}
	}
	if it.err != nil {
		return planner.Note{}, it.err
	}
	return *it.note, nil
}

// newItem is the note of session whose JSON is data. Whether it carries an output is read
// from how encodeNotes begins one, {"session":…,"output":{; a note written otherwise is
// decoded to tell.
func newItem(session, data string) *item {
	it := &item{session: session, data: data}
	rest, ok := jsonscan.Skip(data, `{"session":`)
	if ok {
		_, rest, ok = jsonscan.String(rest)
	}
	if ok {
		_, ok = jsonscan.Skip(rest, `,"output":{`)
	}
	if it.output = ok; !ok {
		if n, err := it.decode(); err == nil {
			it.output = n.Output != nil
		}
	}
	return it
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
	b := &Bus{pool: pool, channel: o.Channel, logger: o.Logger}
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

// Subscribe registers fn; want and fn are called on the listener's goroutine.
func (b *Bus) Subscribe(want func(session string, output bool) bool, fn func(planner.Note)) func() {
	return b.subs.Subscribe(func(it *item) {
		if it == nil {
			fn(planner.Note{Lost: true})
			return
		}
		if it.session != "" && want != nil && !want(it.session, it.output) {
			return
		}
		n, err := it.decode()
		if err != nil {
			return // logged once, by receive
		}
		fn(n)
	})
}

// Publish sends the notes with NOTIFY, packed into as few payloads as they fit; it returns
// once the notifications are committed.
func (b *Bus) Publish(ctx context.Context, notes ...planner.Note) error {
	payloads, err := encodeNotes(notes)
	if err != nil {
		return fmt.Errorf("pgstore: publish: %w", err)
	}
	if err := pglisten.Notify(ctx, b.pool, b.channel, payloads...); err != nil {
		return fmt.Errorf("pgstore: publish: %w", err)
	}
	return nil
}

// encodeNotes returns the NOTIFY payloads of notes.
func encodeNotes(notes []planner.Note) ([]string, error) {
	items := make([]string, len(notes))
	for i, n := range notes {
		data, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		items[i] = n.Session + " " + string(data)
	}
	return pglisten.Pack("", items)
}

// receive hands the notes of a notification to the subscribers. A malformed one is logged.
func (b *Bus) receive(n *pgconn.Notification) {
	_, items, err := b.unpack.Unpack(n.Payload, time.Now())
	if err != nil {
		b.logger.Warn("pgstore: planner bus: malformed notification", "from_pid", n.PID, "err", err)
		return
	}
	for _, s := range items {
		session, data, ok := strings.Cut(s, " ")
		if !ok {
			b.logger.Warn("pgstore: planner bus: malformed notification", "from_pid", n.PID)
			continue
		}
		it := newItem(session, data)
		b.subs.Publish(it)
		if it.err != nil {
			b.logger.Warn("pgstore: planner bus: malformed note", "from_pid", n.PID, "err", it.err)
		}
	}
}

// reconnected drops the fragments of notes that will not complete, and tells subscribers
// that notes may have been lost.
func (b *Bus) reconnected() {
	b.unpack.Reset()
	b.subs.Publish(nil)
}
