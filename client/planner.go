package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/protocol"
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

// PlannerOutput is one planner.output notification: output of a planner
// turn, as Go programs read it (protocol.OutputParams is the wire's form,
// whose is_error is present on every tool_result). The JSON form is the
// notification's params, without is_error when false.
type PlannerOutput struct {
	Subscription string `json:"subscription"`
	Session      string `json:"session"`
	// Turn is the id of the turn the output belongs to and Offset its place
	// in the turn (1, 2, 3, …), the same for every watcher; "" and 0 from a
	// server that does not number outputs.
	Turn      string        `json:"turn,omitempty"`
	Offset    int64         `json:"offset,omitempty"`
	Type      string        `json:"type"`
	Text      string        `json:"text,omitempty"`
	Tool      string        `json:"tool,omitempty"`
	ToolUseID string        `json:"tool_use_id,omitempty"`
	Input     codec.RawJSON `json:"input,omitempty"` // JSON text
	IsError   bool          `json:"is_error,omitempty"`
	Seq       int64         `json:"seq,omitempty"`
}

// outputOf returns the output of a planner.output's params.
func outputOf(p *protocol.OutputParams) PlannerOutput {
	return PlannerOutput{
		Subscription: p.Subscription, Session: p.Session, Turn: p.Turn, Offset: p.Offset, Type: p.Type,
		Text: p.Text, Tool: p.Tool, ToolUseID: p.ToolUseID, Input: p.Input, IsError: p.IsError != nil && *p.IsError,
		Seq: p.Seq,
	}
}

// SendOptions configure PlannerSend. A nil *SendOptions means defaults.
type SendOptions struct {
	// IdempotencyKey names the message (1–64 characters, unique per message
	// of the session and subject for 24 hours): the server answers a send
	// with a key it has seen with that send's seq and starts nothing. Pass
	// one to make a send that is repeated later, by this process or
	// another, count once. Default: a random key per call.
	IdempotencyKey string
}

// PlannerSend stores the human's message text in session and starts the
// planner's turn (planner.send); seq is the message's position in the
// transcript. Watch the session first to see the turn's output. While
// another turn runs the error matches protocol.ErrConflict. A text longer than
// the server's Limits().PlannerMessageBytes is not sent: the error is a
// *LimitError (LimitPlannerMessageBytes), which matches
// rpc.ErrInvalidParams as the server's refusal would.
//
// The message carries an idempotency key, so unlike Call, a send whose
// connection ends before the answer is sent again with the same key on the
// next connection, until ctx ends: the message is stored and answered
// once.
func (c *Client) PlannerSend(ctx context.Context, session, text string, opts *SendOptions) (seq int64, err error) {
	var key string
	if opts != nil {
		key = opts.IdempotencyKey
	}
	if key == "" {
		key = newKey()
	}
	p := protocol.SendParams{Session: session, Text: text, IdempotencyKey: &key}
	var r protocol.SendResult
	var lost uint64 // the connection the last attempt was lost with
	for {
		cn, err := c.connAfter(ctx, lost)
		if err == nil {
			// The limit of the connection the text would go on.
			err = c.checkPlannerMessage(text)
		}
		if err == nil {
			err = cn.call(ctx, protocol.PlannerSend, p, &r)
		}
		if errors.Is(err, ErrConnectionLost) && ctx.Err() == nil && !c.isClosed() {
			c.log.Info("planner.send: connection lost before the answer: sending again", "session", session, "err", err)
			lost = cn.gen
			continue
		}
		if errors.Is(err, ErrConnectionLost) && c.isClosed() {
			err = ErrClosed
		}
		if err != nil {
			return 0, fmt.Errorf("planner.send: %w", err)
		}
		return r.Seq, nil
	}
}

// connAfter is waitConn for a connection newer than gen.
func (c *Client) connAfter(ctx context.Context, gen uint64) (*conn, error) {
	for {
		cn, err := c.waitConn(ctx)
		if err != nil || cn.gen > gen {
			return cn, err
		}
		// Connection gen has ended but the manager has not replaced it yet.
		t := time.NewTimer(time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// newKey returns a random idempotency key.
func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// PlannerCancel stops the session's running turn, if any (planner.cancel).
func (c *Client) PlannerCancel(ctx context.Context, session string) error {
	return c.Call(ctx, protocol.PlannerCancel, protocol.CancelParams{Session: session}, nil)
}
