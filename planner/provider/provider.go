package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Role is the author of a Message.
type Role string

// Message roles. Tool results travel in user messages, as in the Anthropic format.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Block types.
const (
	BlockText       = "text"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
)

// Delta types.
const (
	DeltaText     = "text"
	DeltaToolCall = "tool_call"
)

// Stop reasons the providers normalise to. Others pass through unchanged.
const (
	StopEndTurn      = "end_turn"
	StopToolUse      = "tool_use"
	StopMaxTokens    = "max_tokens"
	StopStopSequence = "stop_sequence"
)

// DefaultMaxTokens is used when Request.MaxTokens is zero.
const DefaultMaxTokens = 4096

// Block is one content block of a message.
type Block struct {
	Type      string          // "text" | "tool_use" | "tool_result"
	Text      string          // text, or the tool_result content
	ToolUseID string          // tool_use id, or the tool_result's tool_use_id
	Name      string          // tool_use tool name
	Input     json.RawMessage // tool_use input (a JSON object)
	IsError   bool            // tool_result: the tool failed
}

// Message is one turn of the conversation sent to the model.
type Message struct {
	Role    Role
	Content []Block
}

// Tool describes a tool the model may call.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage // a JSON Schema object
}

// Request is one model call.
type Request struct {
	System    string
	Messages  []Message
	Tools     []Tool
	MaxTokens int // DefaultMaxTokens when zero
}

// Delta is a piece of output streamed while the model generates.
type Delta struct {
	Type      string // "text" (Text) | "tool_call" (a complete call: ToolUseID, Name, Input)
	Text      string
	ToolUseID string
	Name      string
	Input     json.RawMessage
}

// Usage counts tokens as the provider reports them.
type Usage struct {
	InputTokens  int
	OutputTokens int
}

// Response is the complete result of a model call.
type Response struct {
	Content    []Block // text blocks (one per generated text block) and tool_use blocks, in order
	StopReason string  // "end_turn" | "tool_use" | "max_tokens" | "stop_sequence" | other
	Usage      Usage
}

// Provider is a model backend.
type Provider interface {
	// Name identifies the provider in logs and errors, and is the gen_ai.provider.name of
	// its calls' spans.
	Name() string
	// Model names the model its calls ask for.
	Model() string
	// Stream sends req and calls onDelta for each piece as it arrives, on the calling goroutine.
	// It returns the complete response, or an error. An error returned by onDelta aborts the
	// stream and is returned as is; onDelta may be nil. Cancelling ctx aborts promptly
	// with ctx's error.
	Stream(ctx context.Context, req *Request, onDelta func(Delta) error) (*Response, error)
}

// ErrMalformed reports a stream that broke the provider's wire format: invalid JSON, events
// out of order, or an end before the terminating event. It is returned wrapped with detail.
var ErrMalformed = errors.New("provider: malformed stream")

// Error is a failure reported by a provider or by the connection to it.
type Error struct {
	Provider string // "anthropic", "openai", "scripted"
	Status   int    // HTTP status; 0 for connection failures and in-stream errors
	Type     string // the provider's error type, e.g. "overloaded_error"; "connection_error" when unreachable
	Message  string // never contains the API key
	// Retryable tells whether the same request may succeed later: connection failures, 429,
	// 5xx and overloaded errors that arrived before any delta was delivered.
	Retryable bool
	// RetryAfter is the delay the server asked for (retry-after-ms or retry-after), if any.
	RetryAfter time.Duration
	// Err is the underlying cause of a connection failure, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	b.WriteString(": ")
	if e.Status != 0 {
		fmt.Fprintf(&b, "%d ", e.Status)
	}
	if e.Type != "" {
		b.WriteString(e.Type)
	} else {
		b.WriteString("error")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// IsRetryable reports whether err is an *Error marked Retryable.
func IsRetryable(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Retryable
}

// malformed wraps ErrMalformed with detail.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

func maxTokens(req *Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return DefaultMaxTokens
}

// objectOrEmpty returns raw compacted if it is a JSON object, {} when it is empty or null.
func objectOrEmpty(raw json.RawMessage) (json.RawMessage, error) {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || string(s) == "null" {
		return json.RawMessage("{}"), nil
	}
	if s[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out bytes.Buffer
	if err := json.Compact(&out, s); err != nil {
		return nil, errors.New("invalid JSON")
	}
	return json.RawMessage(out.Bytes()), nil
}

func noDeltas(Delta) error { return nil }
