package client

import (
	"errors"
	"fmt"

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
// with a reason other than lagging. It matches rpc.ErrForbidden for
// "forbidden" and rpc.ErrNotFound for "not_found".
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
		return errors.Is(rpc.ErrForbidden, target)
	case "not_found":
		return errors.Is(rpc.ErrNotFound, target)
	}
	return false
}
