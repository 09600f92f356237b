package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ballet/gateway/protocol"
)

// burstSub is one subscriber of the burst mode, a client as the Realtime
// API describes it: on stream.closed it subscribes again with from_seq =
// the last seq it received, and when its connection is lost it reconnects
// and does the same; on -32010 (resync required) it starts again without
// from_seq (a real client would reload its snapshot). Its driver goroutine
// owns its connection; the counts are read once the driver has returned.
type burstSub struct {
	idx    int
	paused bool
	tr     *tracker
	c      *client
	from   int64 // the latest stream.subscribe seq: from_seq is at least this
	n      int   // subscriptions made, for fresh subscription ids

	closes       codeCounts // stream.closed by reason
	disconnects  codeCounts // connections lost, by close code
	resubscribes int64      // after a stream.closed
	reconnects   int64      // after a lost connection
	resyncs      int64      // -32010 answers
	failures     int64      // dials and subscribes that failed (retried); a close is also in disconnects
}

// codeCounts counts occurrences by a close code or reason.
type codeCounts map[string]int64

func (m codeCounts) add(o codeCounts) {
	for k, v := range o {
		m[k] += v
	}
}

func (m codeCounts) total() int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// drive follows the subscription until ctx ends, then closes its connection.
func (s *burstSub) drive(ctx context.Context, b *bench) {
	defer func() { s.c.close() }()
	for {
		c := s.c
		select {
		case <-ctx.Done():
			return
		case reason := <-c.closedCh:
			s.note(s.closes, reason)
			if ctx.Err() == nil {
				s.resubscribe(ctx, b)
			}
		case <-c.done:
			if ctx.Err() != nil {
				return
			}
			s.note(s.disconnects, strconv.Itoa(c.closeCode))
			if !s.reconnect(ctx, b) {
				return
			}
		}
	}
}

func (s *burstSub) note(m codeCounts, k string) { m[k]++ }

// resumeFrom is the from_seq of the next subscription.
func (s *burstSub) resumeFrom() int64 { return max(s.from, s.tr.last.Load()) }

// resubscribe subscribes again on the same connection after a stream.closed.
// On failure the connection's loss, if that was it, is handled next.
func (s *burstSub) resubscribe(ctx context.Context, b *bench) {
	cctx, cancel := context.WithTimeout(ctx, burstCallTimeout)
	defer cancel()
	err := s.subscribe(cctx, func(id string, from *int64) (int64, error) {
		return s.c.subscribe(cctx, id, s.tr, from)
	})
	if err != nil {
		s.failures++
		if ctx.Err() == nil {
			b.noteError(fmt.Errorf("connection %d: subscribe again: %w", s.idx, err))
		}
		return
	}
	s.resubscribes++
}

// reconnect dials again until it has a subscribed connection or ctx ends.
func (s *burstSub) reconnect(ctx context.Context, b *bench) bool {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			wait := min(100*time.Millisecond<<min(attempt-1, 5), 2*time.Second)
			if sleepUntil(ctx, time.Now().Add(wait)) != nil {
				return false
			}
		}
		cctx, cancel := context.WithTimeout(ctx, burstCallTimeout)
		c, err := b.dial(cctx, s.idx)
		if err == nil {
			err = s.subscribe(cctx, func(id string, from *int64) (int64, error) {
				if from == nil {
					return c.subscribe(cctx, id, s.tr, nil)
				}
				return c.authSubscribe(cctx, b.token, id, s.tr, from)
			})
			if err != nil {
				c.close()
				if c.closeCode != 0 {
					// Closed by the server during the attempt (its replay, say).
					s.note(s.disconnects, strconv.Itoa(c.closeCode))
				}
			}
		}
		cancel()
		if ctx.Err() != nil {
			if err == nil {
				c.close()
			}
			return false
		}
		if err == nil {
			s.c.close()
			s.c = c
			s.reconnects++
			return true
		}
		s.failures++
		b.noteError(fmt.Errorf("connection %d: reconnect: %w", s.idx, err))
	}
}

// subscribe makes the next subscription with from_seq, and without it after
// a -32010 answer, through call.
func (s *burstSub) subscribe(ctx context.Context, call func(id string, from *int64) (int64, error)) error {
	from := s.resumeFrom()
	s.n++
	seq, err := call("s"+strconv.Itoa(s.n), &from)
	var re *rpcError
	if errors.As(err, &re) && re.e.Code == int(protocol.ErrResyncRequired) {
		s.resyncs++
		s.n++
		seq, err = call("s"+strconv.Itoa(s.n), nil)
		if err == nil {
			s.from = seq
		}
	}
	return err
}

// burstCallTimeout bounds one dial, auth or subscribe of a burst subscriber.
const burstCallTimeout = 30 * time.Second
