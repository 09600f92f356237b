package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// WatchOptions configure PlannerWatch. A nil *WatchOptions means defaults.
type WatchOptions struct {
	// FromTurnStart delivers a turn that is running when the watch starts
	// from its start (its output so far first, then live), so that a
	// consumer that joins mid-answer has the whole answer. By default only
	// output from now on is delivered.
	FromTurnStart bool
	// Buffer is the capacity of the Output channel; when it is full the
	// watch ends with ErrSlowConsumer. Default 4096.
	Buffer int
	// OnResume is called when output may have been missed: the watch was
	// established again on a new connection (or after a lagging close, or
	// after a gap in the output) and the server could not replay from the
	// last output delivered (planner.watch answered resumed: false, as it
	// does when no turn runs, since one may have run meanwhile, and as a
	// server without resuming always does). Reload the transcript. running
	// tells whether a turn is in progress. It runs on the client's own
	// goroutine before any new output reaches the channel and must return
	// quickly. When the server resumes, the output goes on without a gap or
	// a duplicate and OnResume is not called.
	OnResume func(running bool)
}

// Watch is a planner.watch: the output of one planner session. Across
// reconnects, lagging closes and gaps it watches again from the last output
// it delivered (turn and offset), so each output reaches the channel once,
// in order.
type Watch struct {
	core[PlannerOutput]
	session   string
	onResume  func(running bool)
	fromStart bool

	// Guarded by mu.
	running bool
	pos     position
	holding bool            // a planner.watch is under way: outputs wait in pending
	pending []PlannerOutput // unjudged, until the answer says where they resume
	stale   uint64          // connection whose server watch was given up for a gap: unsubscribe it first
}

var _ entry = (*Watch)(nil)

// PlannerWatch watches a planner session's output (planner.watch); it runs
// until Unsubscribe. Needs tracker.read on the session's project. A client may
// watch one session several times: each Watch gets every output.
func (c *Client) PlannerWatch(ctx context.Context, session string, opts *WatchOptions) (*Watch, error) {
	var o WatchOptions
	if opts != nil {
		o = *opts
	}
	if o.Buffer <= 0 {
		o.Buffer = 4096
	}
	w := &Watch{session: session, onResume: o.OnResume, fromStart: o.FromTurnStart}
	w.init(c, c.newID(), w, o.Buffer)
	if err := c.register(w.id, w); err != nil {
		return nil, fmt.Errorf("planner.watch %s: %w", session, err)
	}
	err := w.first(ctx)
	if err != nil {
		w.fail(err)
		if c.isClosed() {
			err = ErrClosed
		}
		return nil, fmt.Errorf("planner.watch %s: %w", session, err)
	}
	return w, nil
}

// begin starts a planner.watch: outputs are held from now until its answer.
func (w *Watch) begin(resume bool) (protocol.WatchParams, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := protocol.WatchParams{Subscription: w.id, Session: w.session}
	if resume {
		turn, after, ok := w.pos.resumeFrom()
		if ok {
			p.Turn, p.After = turn, &after
		}
	}
	w.holding, w.pending = true, nil
	return p, w.epoch
}

// abort ends holding after a planner.watch that failed.
func (w *Watch) abort() {
	w.mu.Lock()
	w.holding, w.pending = false, nil
	w.mu.Unlock()
}

// first makes the first planner.watch, retrying on the next connection when
// the connection ends before the answer.
func (w *Watch) first(ctx context.Context) error {
	for {
		cn, err := w.c.waitConn(ctx)
		if err != nil {
			return err
		}
		p, epoch := w.begin(w.fromStart)
		var res protocol.WatchResult
		err = cn.call(ctx, protocol.PlannerWatch, p, &res)
		if err != nil {
			w.abort()
		}
		if errors.Is(err, ErrConnectionLost) && ctx.Err() == nil && !w.c.isClosed() {
			continue
		}
		if err != nil {
			if rpc.Code(err) == 0 {
				w.sentOn(cn.gen) // the server may have it: unsubscribe
			}
			return err
		}
		w.mu.Lock()
		w.running = res.Running
		// From the start of the running turn, every output is expected; a
		// running turn the server could not replay is taken from where it is.
		resumed := res.Resumed != nil && *res.Resumed
		w.pos.resumed(w.fromStart && (resumed || res.Resumed != nil && !res.Running))
		w.mu.Unlock()
		if !w.settled(ctx, cn, epoch) {
			if err := w.Err(); err != nil {
				return err
			}
			return ErrClosed
		}
		w.release(cn.gen)
		w.c.kick() // the connection may have been replaced meanwhile
		return nil
	}
}

// restore watches again on cn from the last output delivered; when the
// server cannot resume from there, OnResume runs before new output is
// handed over.
func (w *Watch) restore(ctx context.Context, cn *conn) error {
	w.mu.Lock()
	if w.feed.done || !w.active || w.gen == cn.gen {
		w.mu.Unlock()
		return nil
	}
	stale := w.stale == cn.gen
	w.mu.Unlock()
	if stale {
		// The id is still taken on the server: free it first (not found
		// means the server had ended that watch itself).
		err := cn.callPatient(ctx, protocol.StreamUnsubscribe, protocol.UnsubscribeParams{Subscription: w.id}, nil)
		if err != nil && rpc.Code(err) == 0 {
			return err
		}
		w.mu.Lock()
		if w.stale == cn.gen {
			w.stale = 0
		}
		w.mu.Unlock()
	}
	p, epoch := w.begin(true)
	var res protocol.WatchResult
	err := cn.callPatient(ctx, protocol.PlannerWatch, p, &res)
	if err != nil {
		w.abort()
		if rpc.Code(err) == 0 {
			return err
		}
		w.fail(fmt.Errorf("planner.watch %s again: %w", w.session, err))
		return nil
	}
	resumed := res.Resumed != nil && *res.Resumed
	w.mu.Lock()
	w.running = res.Running
	w.pos.resumed(resumed)
	w.mu.Unlock()
	if !w.settled(ctx, cn, epoch) {
		return nil
	}
	if !resumed {
		w.c.log.Info("planner watch: output may have been missed", "subscription", w.id, "session", w.session,
			"turn", p.Turn, "after", p.After, "running", res.Running)
		if w.onResume != nil {
			w.onResume(res.Running)
		}
	}
	w.release(cn.gen)
	return nil
}

// deliver takes a planner.output from connection gen.
func (w *Watch) deliver(gen uint64, out PlannerOutput) {
	w.mu.Lock()
	if w.feed.done {
		w.mu.Unlock()
		return
	}
	if w.holding {
		if len(w.pending) < cap(w.feed.ch) {
			w.pending = append(w.pending, out)
			w.mu.Unlock()
			return
		}
		w.feed.end(ErrSlowConsumer)
		w.gen = 0
		w.mu.Unlock()
		w.c.abandon(w.id, w, gen)
		return
	}
	after := w.acceptLocked(gen, out)
	w.mu.Unlock()
	after()
}

// release ends holding and judges the outputs held.
func (w *Watch) release(gen uint64) {
	w.mu.Lock()
	held := w.pending
	w.holding, w.pending = false, nil
	afters := make([]func(), 0, len(held))
	for _, out := range held {
		if w.feed.done {
			break
		}
		afters = append(afters, w.acceptLocked(gen, out))
	}
	w.mu.Unlock()
	for _, after := range afters {
		after()
	}
}

// acceptLocked hands out over when it is the next output, drops it when it
// was delivered already, and after a gap has the watch established again.
// The caller holds w.mu and must call the returned function after
// unlocking.
func (w *Watch) acceptLocked(gen uint64, out PlannerOutput) (after func()) {
	switch w.pos.check(&out) {
	case dropOutput:
		return func() {}
	case gapOutput:
		w.c.log.Debug("planner watch: a gap in the output: watching again", "subscription", w.id,
			"turn", out.Turn, "offset", out.Offset, "last_turn", w.pos.turn, "last_offset", w.pos.offset)
		w.stale = gen
		if w.gen == gen {
			w.gen = 0
		}
		w.epoch++ // a planner.watch under way resumes from too early: again
		return w.c.kick
	}
	ok, after := w.offerLocked(gen, out)
	if ok {
		w.pos.advance(&out)
	}
	return after
}

// end closes the feed and returns the connection the server still serves
// the watch on, also when it was given up for a gap.
func (w *Watch) end(err error) uint64 {
	gen := w.core.end(err)
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen == 0 {
		gen = w.stale
	}
	w.stale = 0
	return gen
}

// Output returns the channel of the session's output. It is closed when the
// watch ends; Err then says why.
func (w *Watch) Output() <-chan PlannerOutput { return w.feed.ch }

// Session returns the watched session id.
func (w *Watch) Session() string { return w.session }

// Running reports whether a turn was in progress when the watch was last
// established.
func (w *Watch) Running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running
}

// Position returns the turn and offset of the last output handed to the
// channel ("" and 0 before any): where the watch resumes from.
func (w *Watch) Position() (turn string, offset int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pos.turn, w.pos.offset
}
