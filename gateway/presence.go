// Presence (an extension): stream.subscribe with "presence": true makes the caller's subject
// present on the stream while the subscription lives, and delivers presence.changed to it;
// presence.get answers the stream's members. The registry (package presence) coalesces and
// shares the changes; this file carries them to the connection.

package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/presence"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

// presenceTimeout bounds presence.get's read of the other replicas' members.
const presenceTimeout = 5 * time.Second

// joinPresence makes subject present on stream for the subscription id and returns what
// ends it (the subscription's cancel, run by forget). Called under s.mu.
func (s *session) joinPresence(stream, id, subject string, cs *clientSub) func() {
	k := &presenceSink{s: s, id: id, cs: cs}
	k.written = func() { k.pending.Add(-1) }
	p := s.srv.presence.Join(stream, subject, s.id, k)
	return p.Leave
}

// presenceSink delivers one subscription's presence.changed. Like the subscription's events,
// at most BALLET_SUBSCRIBER_QUEUE of them wait for the client; past that, or when the
// connection cannot queue them, the subscription is closed lagging.
type presenceSink struct {
	s       *session
	id      string
	cs      *clientSub
	pending atomic.Int64
	written func()
}

var _ presence.Sink = (*presenceSink)(nil)

func (k *presenceSink) PresenceChanged(n *presence.Notice) bool {
	bodies, err := n.Bodies(k.s.codec)
	if err != nil {
		k.s.lg().Error("presence.changed not encodable", "err", err)
		return true
	}
	room := int64(k.s.srv.cfg.SubscriberQueue) - k.pending.Load()
	if int64(len(bodies)) > room {
		return false
	}
	fs := frameSlices.Get().(*[]rpc.Frame)
	for _, b := range bodies {
		*fs = append(*fs, rpc.Frame{Method: presence.MethodChanged, Sub: k.id, Params: b})
	}
	k.pending.Add(int64(len(bodies)))
	ok := k.s.conn.TrySendFrames(*fs, int(room), k.written)
	clear(*fs)
	*fs = (*fs)[:0]
	frameSlices.Put(fs)
	if !ok {
		k.pending.Add(-int64(len(bodies)))
		return false
	}
	k.s.srv.metrics.PresenceChanges.Add(float64(len(bodies)))
	k.s.srv.metrics.MessagesOut.WithLabelValues(presence.MethodChanged).Add(float64(len(bodies)))
	return true
}

// PresenceLost closes the subscription lagging: the client did not keep up.
func (k *presenceSink) PresenceLost() {
	if k.s.forget(k.id, k.cs) {
		k.s.serverClosed(k.id, streams.ReasonLagging)
	}
}

type presenceGetParams struct {
	Stream string `json:"stream"`
}

type presenceGetResult struct {
	Stream    string            `json:"stream"`
	Members   []presence.Member `json:"members"`
	Truncated bool              `json:"truncated"`
}

// presenceGet answers the members of a stream on every replica; it needs tracker.read on the
// stream's project, like subscribing to it.
func (s *session) presenceGet(ctx context.Context, req *rpc.Request, p *auth.Principal) (any, error) {
	var gp presenceGetParams
	if err := req.Decode(&gp); err != nil {
		return nil, err
	}
	st, err := streams.ParseStream(gp.Stream)
	if err != nil {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "stream %q: want project:<KEY> or item:<KEY>", gp.Stream)
	}
	// Short queries; see authorize's callers for why not on the connection's context.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), presenceTimeout)
	defer cancel()
	if err := s.authorize(qctx, st, p, auth.PermRead); err != nil {
		return nil, err
	}
	members, truncated, err := s.srv.presence.Members(qctx, st.String())
	if err != nil {
		return nil, fmt.Errorf("presence of %s: %w", st, err)
	}
	if members == nil {
		members = []presence.Member{}
	}
	return presenceGetResult{Stream: st.String(), Members: members, Truncated: truncated}, nil
}
