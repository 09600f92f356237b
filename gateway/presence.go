// Presence (an extension): stream.subscribe with "presence": true makes the caller's subject
// present on the stream while the subscription lives, and delivers presence.changed to it;
// presence.get answers the stream's members. The registry (package presence) coalesces and
// shares the changes; this file carries them to the connection.

package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/ballet/gateway/internal/subqueue"
	"github.com/ballet/gateway/presence"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
	"github.com/ballet/gateway/streams"
)

// presenceTimeout bounds presence.get's read of the other replicas' members.
const presenceTimeout = 5 * time.Second

// Item presence: a subject present on item:<KEY> is also entered on its project's items
// stream (itemsStream) as presence.GroupSubject(KEY, subject), and a project subscription
// with "item_presence": true watches that stream, hearing it as presence.changed of each
// item:<KEY>. One watcher per board then follows every item of the project, across
// replicas, with the registry's coalescing and bounds (MaxMembers counts (item, subject)
// pairs there). The name cannot be subscribed to: streams.ParseStream knows no "items:".
const itemsPrefix = "items:"

func itemsStream(project string) string { return itemsPrefix + project }

// itemStreamPrefix names an item's stream from its key.
const itemStreamPrefix = "item:"

// joinPresence makes subject present on st for the subscription id (presence), or has the
// subscription follow who has the project's items open (items), or both; it returns what
// ends it (the subscription's cancel, run by forget). Called under s.mu.
func (s *session) joinPresence(st streams.Stream, id, subject string, cs *clientSub, present, items bool) func() {
	reg := s.srv.presence
	queue := subqueue.New(s.srv.cfg.SubscriberQueue) // one bound for the subscription's notifications
	var leave []func()
	if present {
		k := &presenceSink{s: s, id: id, cs: cs, queue: queue}
		leave = append(leave, reg.Join(st.String(), subject, s.connID(), k).Leave)
		if st.Kind == streams.StreamItem {
			leave = append(leave, reg.Enter(itemsStream(st.Project()), presence.GroupSubject(st.Key, subject), s.connID()).Leave)
		}
	}
	if items {
		k := &presenceSink{s: s, id: id, cs: cs, queue: queue, items: true}
		leave = append(leave, reg.Watch(itemsStream(st.Key), k).Leave)
	}
	if len(leave) == 1 {
		return leave[0]
	}
	return func() {
		for _, f := range leave {
			f()
		}
	}
}

// presenceSink delivers one subscription's presence.changed. Like the subscription's events,
// at most BALLET_SUBSCRIBER_QUEUE of them wait for the client; past that, or when the
// connection cannot queue them, the subscription is closed lagging.
type presenceSink struct {
	s     *session
	id    string
	cs    *clientSub
	items bool            // watches an items stream: its notices are those of the items
	queue *subqueue.Queue // notifications queued and not written yet, shared by the subscription's sinks
}

var _ presence.Sink = (*presenceSink)(nil)

func (k *presenceSink) PresenceChanged(n *presence.Notice) bool {
	one := [1]*presence.Notice{n}
	notices := one[:]
	if k.items {
		notices = n.Split(itemStreamPrefix)
	}
	fs := frameSlices.Get().(*[]rpc.Frame)
	defer func() {
		clear(*fs)
		*fs = (*fs)[:0]
		frameSlices.Put(fs)
	}()
	for _, x := range notices {
		bodies, err := x.Bodies(k.s.conn.Codec())
		if err != nil {
			k.s.logger().Error("presence.changed not encodable", "err", err)
			return true
		}
		for _, b := range bodies {
			*fs = append(*fs, rpc.Frame{Method: protocol.PresenceChanged, Sub: k.id, Params: b})
		}
	}
	n0 := len(*fs)
	if n0 == 0 {
		return true
	}
	room, ok := k.queue.Reserve(n0)
	if !ok {
		return false
	}
	if !k.s.conn.TrySendFrames(*fs, room, k.queue.Written()) {
		k.queue.Unreserve(n0)
		return false
	}
	k.s.srv.metrics.PresenceChanges.Add(float64(n0))
	k.s.srv.metrics.MessagesOut.WithLabelValues(protocol.PresenceChanged).Add(float64(n0))
	return true
}

// PresenceLost closes the subscription lagging: the client did not keep up.
func (k *presenceSink) PresenceLost() {
	if k.s.forget(k.id, k.cs) {
		k.s.serverClosed(k.id, streams.ReasonLagging)
	}
}

// presenceGet answers the members of a stream on every replica; it needs tracker.read on the
// stream's project, like subscribing to it.
func (s *session) presenceGet(ctx context.Context, req *rpc.Request, c *call) (any, error) {
	var gp protocol.PresenceGetParams
	if err := req.Decode(&gp); err != nil {
		return nil, err
	}
	st, err := streams.ParseStream(gp.Stream)
	if err != nil {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "stream %q: want project:<KEY> or item:<KEY>", gp.Stream)
	}
	if gp.Items && st.Kind != streams.StreamProject {
		return nil, rpc.Errorf(rpc.ErrInvalidParams, "items: only for a project stream")
	}
	// Short queries; see authorize's callers for why not on the connection's context.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), presenceTimeout)
	defer cancel()
	if err := c.authorize(qctx, s, st); err != nil {
		return nil, err
	}
	members, truncated, err := s.srv.presence.Members(qctx, st.String())
	if err != nil {
		return nil, fmt.Errorf("presence of %s: %w", st, err)
	}
	if members == nil {
		members = []presence.Member{}
	}
	res := protocol.PresenceGetResult{Stream: st.String(), Members: members, Truncated: truncated}
	if gp.Items {
		pairs, truncated, err := s.srv.presence.Members(qctx, itemsStream(st.Key))
		if err != nil {
			return nil, fmt.Errorf("presence on the items of %s: %w", st, err)
		}
		items := groupMembers(pairs)
		res.Items, res.ItemsTruncated = &items, &truncated
	}
	return res, nil
}

// groupMembers returns the members of an items stream as those of each item, in order.
func groupMembers(pairs []presence.Member) []protocol.ItemMembers {
	out := []protocol.ItemMembers{}
	for _, m := range pairs {
		key, subject, ok := presence.SplitSubject(m.Subject)
		if !ok {
			continue
		}
		stream := itemStreamPrefix + key
		if len(out) == 0 || out[len(out)-1].Stream != stream {
			out = append(out, protocol.ItemMembers{Stream: stream})
		}
		last := &out[len(out)-1]
		last.Members = append(last.Members, presence.Member{Subject: subject, Connections: m.Connections})
	}
	return out
}
