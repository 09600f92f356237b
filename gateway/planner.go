package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/internal/subqueue"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

// Planner serves planner chat (planner.Service).
type Planner interface {
	SendWithKey(ctx context.Context, c planner.Caller, session, text, key string) (int64, error)
	Cancel(ctx context.Context, c planner.Caller, session string) error
	WatchFrom(ctx context.Context, c planner.Caller, session string, opts planner.WatchOptions, fn func(planner.Output) bool) (planner.WatchResult, func(), error)
	// Limits are the limits of one person that SendWithKey enforces, advertised in the auth
	// result.
	Limits() planner.Limits
}

var _ Planner = (*planner.Service)(nil)

// plannerError answers a planner error with its kind's code (fault.Code) and its
// caller-safe detail, or else the code's own words; a limit's refusal is -32029 with its
// data, and an error of no kind, or of one without a code (a closing planner), is internal.
func plannerError(method string, err error) error {
	var fe *fault.Error
	if errors.As(err, &fe) && fe.Kind == fault.Limit {
		return limitExceeded(fe.Limited()) // counted by the planner's observer
	}
	code := fault.Code(err)
	if code.ErrorCode() == rpc.ErrInternal.Code {
		return fmt.Errorf("%s: %w", method, err)
	}
	msg := fault.Detail(err)
	if msg == "" {
		msg = code.Error() // the error's own text may hold internals
	}
	return rpc.Errorf(code, "%s", msg)
}

func (s *session) plannerSend(ctx context.Context, req *rpc.Request, c *call) (any, error) {
	var sp protocol.SendParams
	if err := req.Decode(&sp); err != nil {
		return nil, err
	}
	if sp.Session == "" {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "session is required")
	}
	var key string
	if sp.IdempotencyKey != nil {
		if key = *sp.IdempotencyKey; key == "" {
			return nil, rpc.Errorf(rpc.ErrInvalidParams, "params.idempotency_key must be 1 to %d characters", planner.MaxIdempotencyKey)
		}
	}
	seq, err := s.srv.planner.SendWithKey(ctx, c.caller(), sp.Session, sp.Text, key)
	if err != nil {
		return nil, plannerError(req.Method, err)
	}
	return protocol.SendResult{Seq: seq}, nil
}

func (s *session) plannerCancel(ctx context.Context, req *rpc.Request, c *call) (any, error) {
	var cp protocol.CancelParams
	if err := req.Decode(&cp); err != nil {
		return nil, err
	}
	if cp.Session == "" {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "session is required")
	}
	if err := s.srv.planner.Cancel(ctx, c.caller(), cp.Session); err != nil {
		return nil, plannerError(req.Method, err)
	}
	return protocol.Empty{}, nil
}

// plannerWatch delivers planner.output for a session under a subscription id
// of the connection's namespace, until stream.unsubscribe. A watcher that
// cannot keep up gets stream.closed lagging, as the spec says; one that loses
// tracker.read on the project gets forbidden or not_found, after its last
// planner.output, like a stream subscription.
func (s *session) plannerWatch(ctx context.Context, req *rpc.Request, c *call) (any, error) {
	var wp protocol.WatchParams
	if err := req.Decode(&wp); err != nil {
		return nil, err
	}
	if err := checkSubID(wp.Subscription); err != nil {
		return nil, err
	}
	if wp.Session == "" {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "session is required")
	}
	if wp.After != nil && *wp.After < 0 {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "params.after must not be negative")
	}
	if wp.Turn != "" && wp.After == nil {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "params.turn needs params.after")
	}
	cs := &clientSub{kind: "planner"}
	if err := c.reserve(s, wp.Subscription, cs); err != nil {
		return nil, err
	}
	// Frames the client has not taken yet; like a stream subscription's queue, closed when
	// the watch is stopped.
	queue := subqueue.New(s.srv.cfg.SubscriberQueue)
	// closed runs on a watch's goroutine (this one's, or that of another watch of the
	// connection flushing its frames: plannerout.go), which calls fn without a lock held:
	// stopping the watch from here only marks it and closes its queue.
	closed := func(reason string) {
		if s.forget(wp.Subscription, cs) {
			s.serverClosed(wp.Subscription, reason)
		}
	}
	sink := &watchSink{sub: wp.Subscription, queue: queue, closed: closed}
	fn := func(o planner.Output) bool {
		switch o.Type {
		case planner.OutputLagging:
			s.sendOutput(sink, nil, streams.ReasonLagging)
			return false
		case planner.OutputClosed:
			s.sendOutput(sink, nil, o.Text)
			return false
		}
		body, err := s.conn.Codec().Marshal(o)
		if err != nil {
			return true
		}
		if _, ok := queue.Reserve(1); !ok {
			s.sendOutput(sink, nil, streams.ReasonLagging)
			return false
		}
		return s.sendOutput(sink, body, "")
	}
	res, stopWatch, err := s.srv.planner.WatchFrom(ctx, c.caller(), wp.Session,
		planner.WatchOptions{Turn: wp.Turn, After: wp.After}, fn)
	if err != nil {
		return nil, plannerError(req.Method, err) // Handle gives the place back
	}
	stop := func() {
		queue.Close()
		stopWatch()
	}
	s.mu.Lock()
	cur, _ := s.subs.get(wp.Subscription)
	current := cur == cs
	if current {
		cs.cancel = stop
	}
	s.mu.Unlock()
	if !current {
		stop()
	}
	return protocol.WatchResult{Subscription: wp.Subscription, Running: res.Running, Turn: res.Turn, Resumed: res.Resumed}, nil
}

// serverClosed tells the client the server ended a subscription.
func (s *session) serverClosed(id, reason string) {
	s.srv.metrics.ServerCloses.WithLabelValues(reason).Inc()
	if reason == streams.ReasonLagging {
		s.srv.metrics.LaggingCloses.Inc()
	}
	frame, err := s.notification(protocol.StreamClosed, protocol.ClosedParams{Subscription: id, Reason: reason})
	if err != nil || !s.conn.TrySend(frame, nil) {
		// A client that cannot take even this notice is hopelessly behind.
		s.closeWith(websocket.StatusTryAgainLater, "client too slow")
		return
	}
	s.srv.metrics.MessagesOut.WithLabelValues(protocol.StreamClosed).Inc()
	s.endIfDone()
}
