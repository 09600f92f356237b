// The stream.subscribe and stream.unsubscribe methods, the connection's
// subscription-id namespace shared with planner.watch, and the delivery of
// stream.event frames (streams.Sender).

package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

// Subscription ids: 1–64 characters, unique on the connection across
// stream.subscribe and planner.watch.
func checkSubID(id string) error {
	n := utf8.RuneCountInString(id)
	if n < 1 || n > 64 {
		return rpc.Errorf(rpc.ErrInvalidParams, "subscription must be 1 to 64 characters, got %d", n)
	}
	if !streams.ValidText(id) {
		return rpc.Errorf(rpc.ErrInvalidParams, "subscription must be UTF-8 text")
	}
	return nil
}

// reserve claims a subscription id in the connection's namespace. Two subscriptions may
// follow the same thing (a stream, with the same filter or not, a planner session): a
// stream's events are held once in the hub's window whoever pulls them.
func (s *session) reserve(id string, cs *clientSub) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lifecycle() == stateClosed {
		return rpc.ErrClosed
	}
	if _, dup := s.subs.get(id); dup {
		return rpc.Errorf(rpc.ErrInvalidParams, "subscription %q is already in use on this connection", id)
	}
	if max := s.srv.cfg.MaxSubscriptions; s.subs.len() >= max {
		return s.srv.limitError(limitSubscriptions, max, 0)
	}
	s.subs.put(id, cs)
	s.srv.metrics.Subscriptions.WithLabelValues(cs.kind).Inc()
	return nil
}

func (s *session) subscribe(ctx context.Context, req *rpc.Request, c *call) (any, error) {
	p := c.p
	var sp protocol.SubscribeParams
	if err := req.Decode(&sp); err != nil {
		return nil, err
	}
	if err := checkSubID(sp.Subscription); err != nil {
		return nil, err
	}
	st, err := streams.ParseStream(sp.Stream)
	if err != nil {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "stream %q: want project:<KEY> or item:<KEY>", sp.Stream)
	}
	if sp.FromSeq != nil && *sp.FromSeq < 0 {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "from_seq must not be negative")
	}
	if sp.ItemPresence && st.Kind != streams.StreamProject {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "item_presence: only for a project stream")
	}
	types, err := streams.ParseTypes(sp.Types)
	if err != nil {
		return nil, rpc.Errorf(fault.Code(err), "params.%s", fault.Detail(err))
	}
	// A replay is refused at once while the subject's budget is
	// overdrawn, and charged what it read (budgets.go).
	var refused error
	var replay func(context.Context) (func(int), error)
	if sp.FromSeq != nil {
		b := s.budget.Load()
		if err := s.replayRefusal(b); err != nil {
			return nil, err
		}
		replay = s.replayGate(b, &refused)
	}
	kind := st.Kind.String()
	cs := &clientSub{kind: kind}
	if err := c.reserve(s, sp.Subscription, cs); err != nil {
		return nil, err
	}
	// Access is checked by the hub once the subscription is registered and
	// before it delivers anything (streams.SubscribeRequest.Admit): checked
	// before, a revocation dispatched in between would never close it.
	var denied error
	sub, head, err := s.srv.hub.Subscribe(ctx, s.srv.log, streams.SubscribeRequest{
		ID: sp.Subscription, Subject: p.Subject, Stream: st, Codec: s.conn.Codec(), Out: s,
		FromSeq: sp.FromSeq, Types: types, ReplayLimit: s.srv.cfg.ReplayLimit,
		OnClosed: s.subClosed, Replay: replay, CatchUp: s.catchUp,
		Admit: func(ctx context.Context) error {
			denied = c.authorize(ctx, s, st)
			return denied
		},
	})
	if err != nil { // Handle gives the place back
		switch {
		case rpc.Code(denied) != 0:
			return nil, denied // -32003 or -32004, as authorize words it
		case refused != nil:
			return nil, refused
		case errors.Is(err, streams.ErrResyncRequired):
			return nil, rpc.Errorf(fault.Code(err), "resync required: %s", fault.Detail(err))
		}
		return nil, fmt.Errorf("subscribe %s: %w", st, err)
	}
	s.mu.Lock()
	cur, _ := s.subs.get(sp.Subscription)
	current := cur == cs && cs.closed == ""
	if current {
		cs.stream = sub
		if sp.Presence || sp.ItemPresence {
			cs.cancel = s.joinPresence(st, sp.Subscription, p.Subject, cs, sp.Presence, sp.ItemPresence)
		}
	}
	closed := cs.closed
	s.mu.Unlock()
	if !current {
		// Closed while subscribing (lagging during the replay, access lost
		// after the check, or the connection ended): the client hears of
		// it through stream.closed, before the answer.
		s.srv.hub.Unsubscribe(sub)
		if closed != "" && s.forget(sp.Subscription, cs) {
			s.serverClosed(sp.Subscription, closed)
		}
	}
	if sp.FromSeq != nil {
		s.srv.metrics.ReplayEvents.Observe(float64(sub.Replayed()))
	}
	noteReplay(ctx, sp.Stream, sub)
	return protocol.SubscribeResult{Subscription: sp.Subscription, Seq: head}, nil
}

// authorize checks perm on the stream's project: -32004 for an unknown
// project, -32003 without the permission. Items are not looked up.
func (s *session) authorize(ctx context.Context, st streams.Stream, p *auth.Principal, perm auth.Perm) error {
	project := st.Project()
	if project == "" {
		return rpc.Errorf(protocol.ErrNotFound, "%s not found", st)
	}
	role, exists, err := s.srv.roles.Role(ctx, project, p.Subject)
	if err != nil {
		return fmt.Errorf("role of %s in %s: %w", p.Subject, project, err)
	}
	if !exists {
		return rpc.Errorf(protocol.ErrNotFound, "project %s not found", project)
	}
	if !auth.Role(role).Has(perm) {
		return rpc.Errorf(protocol.ErrForbidden, "%s on project %s is required", perm, project)
	}
	// item:<KEY> follows the key whoever writes its events, the gateway's tracker or another
	// program: an item with no event yet is an empty stream, not an unknown one.
	return nil
}

// subClosed runs when the hub closes a subscription (lagging, forbidden,
// not_found): it leaves the namespace and the client is told. One closed
// while subscribing is left to subscribe, which answers an error instead
// when the subscription fails (its access check, say): the client hears of
// it once.
func (s *session) subClosed(sub *streams.Subscription, reason string) {
	s.mu.Lock()
	cs, ok := s.subs.get(sub.ID())
	mine := ok && cs.kind != "planner" && (cs.stream == sub || cs.stream == nil)
	if mine && cs.stream == nil {
		if cs.closed == "" {
			cs.closed = reason
		}
		mine = false
	}
	s.mu.Unlock()
	if !mine || !s.forget(sub.ID(), cs) {
		return
	}
	s.serverClosed(sub.ID(), reason)
}

func (s *session) unsubscribe(_ context.Context, req *rpc.Request, _ *call) (any, error) {
	var up protocol.UnsubscribeParams
	if err := req.Decode(&up); err != nil {
		return nil, err
	}
	s.mu.Lock()
	cs, ok := s.subs.get(up.Subscription)
	s.mu.Unlock()
	if !ok || !s.forget(up.Subscription, cs) {
		return nil, rpc.Errorf(protocol.ErrNotFound, "subscription %q not found", up.Subscription)
	}
	return protocol.Empty{}, nil
}

// Ready hands a subscription with events to pull to the connection's writer
// (streams.Sender).
func (s *session) Ready(src streams.Source) { s.conn.Ready(src) }

// catchUp paces a subscription that fell behind the hub's window, or a replay past its first
// page, by the subject's replay budget (streams.SubscribeRequest.CatchUp): it charges the
// events a page read from the log, and while the budget is overdrawn the next page waits
// until it is not, instead of the subscription closing lagging.
func (s *session) catchUp(read int) time.Duration {
	b := s.budget.Load()
	if b == nil {
		return 0
	}
	if read > 0 {
		b.chargeReplay(&s.srv.cfg, read)
		return 0
	}
	return b.replayRetry(&s.srv.cfg)
}
