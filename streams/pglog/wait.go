package pglog

import (
	"context"
	"time"

	"github.com/ballet/gateway/streams"
)

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
//
// On a Tail, it polls the standby instead (see tail.go): every TailPoll while events arrive,
// every TailIdlePoll when idle.
func (l *Log) Wait(ctx context.Context, after int64) error {
	if l.tail != nil {
		return l.waitTail(ctx, after)
	}
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

func (l *Log) waitTail(ctx context.Context, after int64) error {
	select {
	case <-l.closed:
		return streams.ErrClosed
	default:
	}
	if l.tail.behind(ctx, after) {
		return ctx.Err()
	}
	t := time.NewTimer(l.tail.interval(time.Now()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.closed:
			return streams.ErrClosed
		case <-t.C:
			if l.tail.behind(ctx, after) {
				return ctx.Err()
			}
			t.Reset(l.tail.interval(time.Now()))
		}
	}
}

// behind reports whether the log has events after `after`, or cannot say.
func (l *Log) behind(ctx context.Context, after int64) bool {
	head, err := l.Head(ctx)
	return err != nil || head > after
}
