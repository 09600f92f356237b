package client

import (
	"context"

	"github.com/ballet/gateway/codec"
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
// turn. The JSON form is the notification's params.
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
