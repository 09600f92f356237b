package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

var (
	// ErrClosed is returned by calls on a closed client and ends its
	// subscriptions.
	ErrClosed = errors.New("client: closed")
	// ErrConnectionLost is returned by a call whose connection ended before
	// the answer came; the request may or may not have been processed.
	ErrConnectionLost = errors.New("client: connection lost")
	// ErrHeartbeatTimeout is why a connection ends after three heartbeat
	// intervals without any message from the server.
	ErrHeartbeatTimeout = errors.New("client: heartbeat timeout")
	// ErrSlowConsumer ends a subscription whose buffer was full when an
	// event or output arrived: the application did not read in time.
	ErrSlowConsumer = errors.New("client: subscription buffer full")
	// ErrSubprotocol is returned by Dial when the server did not accept the
	// codec's subprotocol.
	ErrSubprotocol = errors.New("client: subprotocol not accepted")
	// ErrFrameKind ends a connection on which the server sent a frame of the
	// other codec's kind.
	ErrFrameKind = errors.New("client: frame kind does not match the subprotocol")
)

// ClosedError ends a subscription that the server closed (stream.closed)
// with a reason other than lagging. It matches protocol.ErrForbidden for
// "forbidden" and protocol.ErrNotFound for "not_found".
type ClosedError struct {
	Subscription string
	Reason       string
}

func (e *ClosedError) Error() string {
	return fmt.Sprintf("client: subscription %s closed by the server: %s", e.Subscription, e.Reason)
}

// Is matches the rpc error of the same meaning.
func (e *ClosedError) Is(target error) bool {
	switch e.Reason {
	case "forbidden":
		return errors.Is(protocol.ErrForbidden, target)
	case "not_found":
		return errors.Is(protocol.ErrNotFound, target)
	}
	return false
}

// The limits of LimitError.Limit: those a server refuses with -32029, and
// LimitPlannerMessageBytes, which the client refuses itself (the server's
// refusal of a longer text is -32602 without data).
const (
	LimitSubscriptions         = protocol.LimitSubscriptions
	LimitRequests              = protocol.LimitRequests
	LimitSubjectRequests       = protocol.LimitSubjectRequests
	LimitReplay                = protocol.LimitReplay
	LimitConnectionsPerSubject = protocol.LimitConnectionsPerSubject
	LimitPlannerTurns          = protocol.LimitPlannerTurns
	LimitPlannerMessageBytes   = "planner_message_bytes" // bytes of a planner.send text (refused by the client only)
)

// LimitError is a server limit that was reached: the server's -32029
// answer, or the client's own refusal of what would go beyond a limit the
// server advertised (then nothing was sent): a subscription beyond
// LimitSubscriptions or a planner message beyond LimitPlannerMessageBytes.
// It matches the error the server answers beyond the limit, and rpc.Code
// reports its code: rpc.ErrInvalidParams (-32602) for
// LimitPlannerMessageBytes, protocol.ErrLimitExceeded (-32029) for the others.
type LimitError struct {
	Limit      string        // one of the Limit constants
	Max        int           // the limit's value
	RetryAfter time.Duration // for the rates (LimitRequests, LimitSubjectRequests, LimitReplay): when the server takes the request again
	err        *rpc.Error
}

func (e *LimitError) Error() string {
	if e.err != nil {
		return e.err.Message
	}
	return fmt.Sprintf("client: limit exceeded: %s (at most %d)", e.Limit, e.Max)
}

// Unwrap returns the JSON-RPC error: the server's, or a local one with
// the code the server answers beyond the limit.
func (e *LimitError) Unwrap() error {
	if e.err != nil {
		return e.err
	}
	code := int(protocol.ErrLimitExceeded)
	if e.Limit == LimitPlannerMessageBytes {
		code = rpc.ErrInvalidParams.Code
	}
	return &rpc.Error{Code: code, Message: e.Error()}
}

// asLimitError turns a -32029 answer into a *LimitError; other errors
// are returned as they are.
func asLimitError(err error) error {
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != int(protocol.ErrLimitExceeded) {
		return err
	}
	le := &LimitError{err: re}
	var d protocol.LimitData
	if raw, jerr := json.Marshal(re.Data); re.Data != nil && jerr == nil && json.Unmarshal(raw, &d) == nil {
		le.Limit, le.Max = d.Limit, d.Max
		if d.RetryAfterMs != nil {
			le.RetryAfter = time.Duration(max(*d.RetryAfterMs, 0)) * time.Millisecond
		}
	}
	return le
}

// HandshakeError is a WebSocket handshake that the server answered with an
// HTTP status instead of switching protocols, such as 503 from a replica
// at its connection limit, or a POST over HTTP refused so. RetryAfter is its
// Retry-After header, 0 when absent; the client waits at least that long
// before its next attempt.
type HandshakeError struct {
	StatusCode int
	RetryAfter time.Duration
	err        error
}

func (e *HandshakeError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%v (retry after %v)", e.err, e.RetryAfter)
	}
	return e.err.Error()
}

func (e *HandshakeError) Unwrap() error { return e.err }

// isSubjectLimit reports whether err says that the subject has too many
// connections: the auth refused with -32029, or a close with 4029.
func isSubjectLimit(err error) bool {
	var le *LimitError
	if errors.As(err, &le) && le.Limit == LimitConnectionsPerSubject {
		return true
	}
	return websocket.CloseStatus(err) == protocol.CloseLimitExceeded
}
