package pglisten

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultApplicationName names a listening connection whose configuration sets no
// application_name and whose Options do not either.
const DefaultApplicationName = "ballet-gateway-listener"

const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
	// idlePing is how long the listener waits for a notification before checking that its
	// connection is still alive (a silently dead connection would otherwise go unnoticed).
	idlePing    = 30 * time.Second
	pingTimeout = 5 * time.Second
)

// Options configure a Listener. A nil *Options means defaults.
type Options struct {
	// ApplicationName names the connection (pg_stat_activity.application_name) when its
	// configuration sets none; describe the role, like "ballet-gateway-planner-bus". Default
	// DefaultApplicationName.
	ApplicationName string
	// OnNotify is called with every notification, on the listener's goroutine, in delivery
	// order. Notifications wait while it runs, so it should return quickly. Default: none.
	OnNotify func(*pgconn.Notification)
	// OnReconnect is called on the listener's goroutine once a replacement connection listens
	// (not for the first one): notifications sent meanwhile are lost, and the caller should
	// catch up. Default: none.
	OnReconnect func()
	// Logger receives connection losses and reconnects. Default slog.Default().
	Logger *slog.Logger
}

// Listener owns one LISTENing connection and the goroutine that reads it.
type Listener struct {
	cfg         *pgx.ConnConfig
	channels    []string
	onNotify    func(*pgconn.Notification)
	onReconnect func()
	logger      *slog.Logger

	pid       atomic.Int32
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// Open connects with a copy of cfg, LISTENs on channels and keeps listening, reconnecting
// with backoff, until Close. cfg must come from pgx.ParseConfig (a pool's does).
func Open(ctx context.Context, cfg *pgx.ConnConfig, channels []string, opts *Options) (*Listener, error) {
	if len(channels) == 0 {
		return nil, errors.New("pglisten: no channel to listen on")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ApplicationName == "" {
		o.ApplicationName = DefaultApplicationName
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := cfg.Copy()
	if c.RuntimeParams == nil {
		c.RuntimeParams = map[string]string{}
	}
	if c.RuntimeParams["application_name"] == "" {
		c.RuntimeParams["application_name"] = o.ApplicationName
	}
	l := &Listener{
		cfg:         c,
		channels:    append([]string(nil), channels...),
		onNotify:    o.OnNotify,
		onReconnect: o.OnReconnect,
		logger:      o.Logger.With("listen", strings.Join(channels, ",")),
		done:        make(chan struct{}),
	}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(lctx, conn)
	return l, nil
}

// Close stops the listener, closes its connection and waits for its goroutine. Safe to call
// twice.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		<-l.done
	})
	return nil
}

// PID is the backend pid of the listening connection, 0 while it is disconnected or closed.
func (l *Listener) PID() int32 { return l.pid.Load() }

// connect opens a connection and LISTENs on every channel.
func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, fmt.Errorf("pglisten: connect: %w", err)
	}
	for _, ch := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			closeConn(conn)
			return nil, fmt.Errorf("pglisten: listen %s: %w", ch, err)
		}
	}
	l.pid.Store(int32(conn.PgConn().PID()))
	return conn, nil
}

// run owns the connection: it reads notifications until the connection fails, then replaces
// it and reports the reconnect, until ctx ends.
func (l *Listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := backoffMin
	for {
		if conn != nil {
			err := l.receive(ctx, conn)
			l.pid.Store(0)
			closeConn(conn)
			conn = nil
			if ctx.Err() != nil {
				return
			}
			l.logger.Warn("pglisten: connection lost; reconnecting", "err", err)
		}
		if !sleep(ctx, jitter(backoff)) {
			return
		}
		var err error
		if conn, err = l.connect(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			l.logger.Warn("pglisten: reconnect failed", "err", err, "retry_in", backoff)
			backoff = min(2*backoff, backoffMax)
			continue
		}
		l.logger.Info("pglisten: reconnected")
		backoff = backoffMin
		if l.onReconnect != nil {
			l.onReconnect()
		}
	}
}

// receive hands notifications to onNotify until the connection fails or ctx ends.
func (l *Listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, idlePing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if l.onNotify != nil {
				l.onNotify(n)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
			if conn.IsClosed() {
				return err
			}
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		default:
			return err
		}
	}
}

// closeConn closes conn, giving the server a second to hear of it.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
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
