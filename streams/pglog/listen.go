package pglog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ballet/gateway/streams"
)

const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
	// idlePing is how long the listener waits for a notification before checking that its
	// connection is still alive (a silently dead connection would otherwise go unnoticed).
	idlePing = 30 * time.Second
)

// listen opens a dedicated connection with the pool's settings and LISTENs on the channel.
func (l *Log) listen(ctx context.Context) (*pgx.Conn, error) {
	cfg := l.pool.Config().ConnConfig
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "ballet-gateway-listener"
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("listener connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("listen %s: %w", l.channel, err)
	}
	l.pid.Store(int32(conn.PgConn().PID()))
	return conn, nil
}

// run owns the LISTEN connection: it turns notifications into wake-ups, and replaces the
// connection when it is lost. Every (re)connect wakes waiters, since notifications sent while
// no connection listened are gone.
func (l *Log) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := backoffMin
	for {
		if conn != nil {
			l.wake()
			err := l.receive(ctx, conn)
			l.pid.Store(0)
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
			conn = nil
			if ctx.Err() != nil {
				return
			}
			l.logger.Warn("pglog: event listener connection lost; reconnecting", "err", err)
		}
		if !sleep(ctx, jitter(backoff)) {
			return
		}
		var err error
		if conn, err = l.listen(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			l.logger.Warn("pglog: event listener reconnect failed", "err", err, "retry_in", backoff)
			backoff = min(2*backoff, backoffMax)
			continue
		}
		l.logger.Info("pglog: event listener reconnected")
		backoff = backoffMin
	}
}

// receive forwards notifications as wake-ups until the connection fails or ctx ends.
func (l *Log) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, idlePing)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			l.wake()
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

// wake releases every current Wait.
func (l *Log) wake() {
	l.mu.Lock()
	close(l.wakeCh)
	l.wakeCh = make(chan struct{})
	l.mu.Unlock()
}

// Wait returns when a notification arrives or the listener reconnects (possibly spurious
// wake-ups), when a poll every PollInterval finds events after `after`, when ctx ends
// (ctx.Err()) or when the log is closed (streams.ErrClosed). It returns at once if the log
// already has events after `after`, and also when it cannot tell: a failing Head check is a
// wake-up, so that the caller's next read reports the database's state.
func (l *Log) Wait(ctx context.Context, after int64) error {
	l.mu.Lock()
	ch := l.wakeCh
	l.mu.Unlock()
	// The wake channel is taken before this check: an event committed after the check
	// notifies after it, and closes ch (or its successor, closing ch already).
	select {
	case <-l.closed:
		return streams.ErrClosed
	default:
	}
	if l.behind(ctx, after) {
		return ctx.Err()
	}
	t := time.NewTimer(l.poll)
	defer t.Stop()
	for {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-l.closed:
			return streams.ErrClosed
		case <-t.C:
			if l.behind(ctx, after) {
				return ctx.Err()
			}
			t.Reset(l.poll)
		}
	}
}

// behind reports whether the log has events after `after`, or cannot say.
func (l *Log) behind(ctx context.Context, after int64) bool {
	head, err := l.Head(ctx)
	return err != nil || head > after
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
