package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/rpc"
)

// Types of planner.output.
const (
	OutputText       = "text"        // a piece of the answer (Text)
	OutputToolCall   = "tool_call"   // the planner called Tool (ToolUseID, Input)
	OutputToolResult = "tool_result" // the tool returned Text (IsError on failure)
	OutputMessage    = "message"     // message Seq was stored in the transcript
	OutputCompacted  = "compacted"   // messages up to Seq were summarized for the model
	OutputError      = "error"       // the turn failed (Text explains)
	OutputDone       = "done"        // the turn ended; Text is the reason
)

// PlannerOutput is one planner.output notification: live output of a
// planner turn. The JSON form is the notification's params.
type PlannerOutput struct {
	Subscription string        `json:"subscription"`
	Session      string        `json:"session"`
	Type         string        `json:"type"`
	Text         string        `json:"text,omitempty"`
	Tool         string        `json:"tool,omitempty"`
	ToolUseID    string        `json:"tool_use_id,omitempty"`
	Input        codec.RawJSON `json:"input,omitempty"` // JSON text
	IsError      bool          `json:"is_error,omitempty"`
	Seq          int64         `json:"seq,omitempty"`
}

// WatchOptions configure PlannerWatch. A nil *WatchOptions means defaults.
type WatchOptions struct {
	// Buffer is the capacity of the Output channel; when it is full the
	// watch ends with ErrSlowConsumer. Default 4096.
	Buffer int
	// OnResume is called after the watch was established again on a new
	// connection (or after a lagging close): live output is not replayed,
	// so what was generated in between is missing; reload the transcript.
	// running tells whether a turn is in progress. It runs on the client's
	// own goroutine before any new output reaches the channel and must
	// return quickly.
	OnResume func(running bool)
}

// Watch is a planner.watch: the live output of one planner session.
type Watch struct {
	core[PlannerOutput]
	session  string
	onResume func(running bool)
	running  bool
}

var _ entry = (*Watch)(nil)

type watchParams struct {
	Subscription string `json:"subscription"`
	Session      string `json:"session"`
}

type watchResult struct {
	Subscription string `json:"subscription"`
	Running      bool   `json:"running"`
}

// PlannerWatch watches a planner session's live output (planner.watch);
// it runs until Unsubscribe. Needs tracker.read on the session's project.
func (c *Client) PlannerWatch(ctx context.Context, session string, opts *WatchOptions) (*Watch, error) {
	var o WatchOptions
	if opts != nil {
		o = *opts
	}
	if o.Buffer <= 0 {
		o.Buffer = 4096
	}
	w := &Watch{session: session, onResume: o.OnResume}
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

func (w *Watch) first(ctx context.Context) error {
	for {
		cn, err := w.c.waitConn(ctx)
		if err != nil {
			return err
		}
		w.mu.Lock()
		epoch := w.epoch
		w.mu.Unlock()
		var res watchResult
		err = cn.call(ctx, "planner.watch", watchParams{Subscription: w.id, Session: w.session}, &res)
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
		w.mu.Unlock()
		if !w.settled(ctx, cn, epoch) {
			if err := w.Err(); err != nil {
				return err
			}
			return ErrClosed
		}
		w.c.kick()
		return nil
	}
}

func (w *Watch) deliver(gen uint64, out PlannerOutput) {
	w.mu.Lock()
	if w.feed.done {
		w.mu.Unlock()
		return
	}
	_, after := w.offerLocked(gen, out)
	w.mu.Unlock()
	after()
}

// restore watches again on cn and runs OnResume before new output is
// handed over.
func (w *Watch) restore(ctx context.Context, cn *conn) error {
	w.mu.Lock()
	if w.feed.done || !w.active || w.gen == cn.gen {
		w.mu.Unlock()
		return nil
	}
	epoch := w.epoch
	w.feed.hold = true
	w.mu.Unlock()
	var res watchResult
	err := cn.callPatient(ctx, "planner.watch", watchParams{Subscription: w.id, Session: w.session}, &res)
	if err != nil {
		w.mu.Lock()
		w.feed.hold, w.feed.held = false, nil
		w.mu.Unlock()
		if rpc.Code(err) == 0 {
			return err
		}
		w.fail(fmt.Errorf("planner.watch %s again: %w", w.session, err))
		return nil
	}
	w.mu.Lock()
	w.running = res.Running
	w.mu.Unlock()
	if !w.settled(ctx, cn, epoch) {
		return nil
	}
	if w.onResume != nil {
		w.onResume(res.Running)
	}
	w.mu.Lock()
	if w.feed.done || w.feed.release() {
		w.mu.Unlock()
		return nil
	}
	w.feed.end(ErrSlowConsumer)
	w.gen = 0
	w.mu.Unlock()
	w.c.abandon(w.id, w, cn.gen)
	return nil
}

// Output returns the channel of the session's live output. It is closed
// when the watch ends; Err then says why.
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

type sendParams struct {
	Session string `json:"session"`
	Text    string `json:"text"`
}

type sendResult struct {
	Seq int64 `json:"seq"`
}

// PlannerSend stores the human's message text in session and starts the
// planner's turn (planner.send); seq is the message's position in the
// transcript. Watch the session first to see the turn's output. While a turn
// runs the error matches rpc.ErrConflict.
func (c *Client) PlannerSend(ctx context.Context, session, text string) (seq int64, err error) {
	var r sendResult
	if err := c.Call(ctx, "planner.send", sendParams{Session: session, Text: text}, &r); err != nil {
		return 0, err
	}
	return r.Seq, nil
}

type cancelParams struct {
	Session string `json:"session"`
}

// PlannerCancel stops the session's running turn, if any (planner.cancel).
func (c *Client) PlannerCancel(ctx context.Context, session string) error {
	return c.Call(ctx, "planner.cancel", cancelParams{Session: session}, nil)
}
