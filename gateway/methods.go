// The method table: from a method name to its handler and what it needs,
// so that main → Server → methods → handler is the whole route.

package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

// method is one entry of the method table: the handler of a request or
// notification, and what is required before it runs.
type method struct {
	// serve answers the message; c carries the caller (nil only for auth) and
	// what this entry requires of the handler.
	serve func(s *session, ctx context.Context, req *rpc.Request, c *call) (any, error)
	// anonymous: served before authentication, and only then (auth).
	anonymous bool
	// planner: served only when the server runs the planner.
	planner bool
	// human: the caller must be a person, not a service (RFC 9068: a
	// client-credentials token has sub = client id).
	human bool
	// perm is the permission needed on the project the params name, known
	// only once they are read: the handler checks this one (call.authorize),
	// or hands the check to the planner service (call.caller), and Handle
	// answers an internal error to a success that did neither.
	perm auth.Perm
	// subscribes: each success takes one of the connection's
	// BALLET_MAX_SUBSCRIPTIONS places, under the params' subscription id,
	// until stream.unsubscribe or stream.closed. The handler takes it
	// (call.reserve) and only a method that subscribes can; Handle gives it
	// back when the method fails, and answers an internal error to a
	// success that took none.
	subscribes bool
}

// call is one message being served, as its handler sees it: the caller and
// what the method's table entry requires of the handler.
type call struct {
	p       *auth.Principal
	m       *method
	checked atomic.Bool // perm was checked, or handed to the planner service
	id      string      // the subscription id reserved, with cs
	cs      *clientSub
}

// authorize checks the table's perm on the stream's project (session.authorize).
func (c *call) authorize(ctx context.Context, s *session, st streams.Stream) error {
	c.checked.Store(true)
	return s.authorize(ctx, st, c.p, c.m.perm)
}

// caller is the planner service's caller, which checks the method's perm
// itself: planner.send and planner.cancel tracker.write on the session's
// project, planner.watch tracker.read (TestTablePermissions holds the two
// together).
func (c *call) caller() planner.Caller {
	c.checked.Store(true)
	return planner.CallerFor(c.p)
}

// reserve claims id in the connection's subscription namespace for cs, if
// the method subscribes (session.reserve).
func (c *call) reserve(s *session, id string, cs *clientSub) error {
	if !c.m.subscribes || c.cs != nil {
		return fmt.Errorf("method takes no subscription place, or took one already")
	}
	if err := s.reserve(id, cs); err != nil {
		return err
	}
	c.id, c.cs = id, cs
	return nil
}

// methods is every method the gateway serves, keyed by the names of the
// protocol table's Served methods (methods_test.go holds the two together).
// Every message, request or notification, also spends the connection's
// BALLET_REQUEST_RATE budget and its subject's BALLET_SUBJECT_REQUEST_RATE
// (session.Admit); before auth only an auth request is read (session.Screen).
var methods = map[string]method{
	protocol.Auth:              {serve: (*session).auth, anonymous: true},
	protocol.AuthRefresh:       {serve: (*session).refresh},
	protocol.Heartbeat:         {serve: (*session).heartbeatReceived},
	protocol.SystemPing:        {serve: (*session).ping},
	protocol.StreamSubscribe:   {serve: (*session).subscribe, perm: auth.PermRead, subscribes: true},
	protocol.StreamUnsubscribe: {serve: (*session).unsubscribe},
	protocol.PlannerSend:       {serve: (*session).plannerSend, planner: true, human: true, perm: auth.PermWrite},
	protocol.PlannerCancel:     {serve: (*session).plannerCancel, planner: true, perm: auth.PermWrite},
	protocol.PlannerWatch:      {serve: (*session).plannerWatch, planner: true, perm: auth.PermRead, subscribes: true},
	protocol.PresenceGet:       {serve: (*session).presenceGet, perm: auth.PermRead},
}

// Handle serves one request or notification (rpc.Handler): it finds the
// method in the table, checks what the table requires, and counts it.
func (s *session) Handle(ctx context.Context, req *rpc.Request) (result any, err error) {
	label := methodLabel(req.Method)
	s.srv.metrics.MessagesIn.WithLabelValues(label).Inc()
	if s.srv.tracer != nil && !req.Notification {
		var span trace.Span
		ctx, span = s.startRequest(ctx, req)
		defer func() { endRequest(span, err) }()
	}
	if !req.Notification {
		start := time.Now()
		defer func() {
			s.srv.metrics.Requests.WithLabelValues(label, codeLabel(rpc.Code(errOrNil(err)))).Inc()
			s.srv.metrics.RequestDuration.WithLabelValues(label).Observe(time.Since(start).Seconds())
		}()
	}
	if s.http {
		req.AfterReply(s.answeredHTTP) // its one request: the response ends after it, unless it subscribed
	}
	m, found := methods[req.Method]
	p := s.getPrincipal()
	switch {
	case p == nil && (!m.anonymous || req.Notification):
		s.srv.metrics.AuthFailures.WithLabelValues("no_auth").Inc()
		const msg = "the first message must be an auth request"
		s.refuse() // read no further while the answer goes out
		req.AfterReply(func() { s.closeWith(StatusUnauthenticated, msg) })
		return nil, rpc.Errorf(protocol.ErrUnauthenticated, msg)
	case !found || (m.planner && s.srv.planner == nil):
		return nil, rpc.Errorf(rpc.ErrMethodNotFound, "method %s not found", shorten(req.Method, 64))
	case m.anonymous && p != nil:
		return nil, rpc.Errorf(rpc.ErrInvalidRequest, "already authenticated: use auth.refresh")
	case m.human && !p.Human:
		return nil, rpc.Errorf(protocol.ErrForbidden, "%s needs a person's token, not a service's", req.Method)
	}
	c := &call{p: p, m: &m}
	result, err = m.serve(s, ctx, req, c)
	switch {
	case err != nil:
		if c.cs != nil {
			s.forget(c.id, c.cs)
		}
	case !c.served():
		// A handler that does not do what its table entry says: a bug, answered as one.
		s.logger().Error("method served without what its table entry requires", "method", req.Method)
		return nil, rpc.ErrInternal
	}
	return result, err
}

// served reports whether a handler that succeeded did what its table entry requires: checked
// its permission, and took a subscription place if the method subscribes.
func (c *call) served() bool {
	return (c.m.perm == "" || c.checked.Load()) && (!c.m.subscribes || c.cs != nil)
}

func (s *session) ping(_ context.Context, _ *rpc.Request, c *call) (any, error) {
	return protocol.PingResult{Time: s.srv.now().UnixMilli(), Subject: c.p.Subject}, nil
}

// heartbeatReceived does nothing: any message counts as the peer's
// liveness (OnMessage), a heartbeat only exists to be one.
func (s *session) heartbeatReceived(context.Context, *rpc.Request, *call) (any, error) {
	return nil, nil
}

// shorten cuts s to at most n characters, marking the cut with "…": a
// peer's text quoted in an answer costs no more than that.
func shorten(s string, n int) string {
	i := 0
	for at := range s {
		if i == n {
			return s[:at] + "…"
		}
		i++
	}
	return s
}

func errOrNil(err error) error {
	if err == nil {
		return nil
	}
	if rpc.Code(err) == 0 {
		return rpc.ErrInternal
	}
	return err
}
