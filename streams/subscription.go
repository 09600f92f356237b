package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ballet/gateway/codec"
)

// Reasons a subscription is closed by the server (stream.closed).
const (
	ReasonLagging   = "lagging"
	ReasonForbidden = "forbidden"
	ReasonNotFound  = "not_found"
)

// ErrResyncRequired: from_seq is older than the replay limit allows, or
// beyond the log's head.
var ErrResyncRequired = errors.New("streams: resync required")

// MethodEvent is the notification that carries one event.
const MethodEvent = "stream.event"

// Sender is the connection a subscription writes to. TrySendSpliced queues
// the notification method with params body plus "subscription": sub (the
// connection builds the frame, so the shared body is never copied per
// subscriber); it must not block, and done is called once the frame is
// written or dropped.
type Sender interface {
	TrySendSpliced(method, sub string, body []byte, done func()) bool
}

// SubscribeRequest describes a new subscription.
type SubscribeRequest struct {
	ID      string // chosen by the client
	Subject string // who subscribed, for permission changes
	Stream  Stream
	Codec   codec.Codec
	Out     Sender
	// FromSeq, when set, asks for the stream's events after it first.
	FromSeq *int64
	// QueueLimit bounds frames queued for the client (default 4096); more
	// closes the subscription with ReasonLagging.
	QueueLimit int
	// ReplayLimit bounds the events replayed from FromSeq (default 1000);
	// more is ErrResyncRequired.
	ReplayLimit int
	// OnClosed is called once when the server closes the subscription
	// (not on Unsubscribe), after it left the hub. It must not block.
	OnClosed func(sub *Subscription, reason string)
}

// Subscription is one client's interest in one stream.
type Subscription struct {
	id       string
	subject  string
	stream   Stream
	codec    codec.Codec
	out      Sender
	limit    int
	onClosed func(*Subscription, string)

	mu       sync.Mutex
	state    subState
	reason   string
	last     int64 // highest seq sent (or covered by the replay)
	pending  int   // frames handed to out and not yet written
	replayed int   // events sent from the replay
	buffer   []buffered
	// written is bound once so queuing a frame does not allocate a closure.
	written func()
	// drained is signalled when a frame was written, for a replay waiting
	// for queue space; made by the first such wait.
	drained chan struct{}
}

type subState uint8

const (
	subBuffering subState = iota // registered; live events wait for the replay
	subLive
	subClosed
)

type buffered struct {
	seq  int64
	body []byte
}

// ID returns the client's subscription id.
func (s *Subscription) ID() string { return s.id }

// Subject returns who subscribed.
func (s *Subscription) Subject() string { return s.subject }

// Stream returns the subscribed stream.
func (s *Subscription) Stream() Stream { return s.stream }

// Replayed returns how many events the subscription replayed from FromSeq.
func (s *Subscription) Replayed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replayed
}

// Subscribe registers a subscription and, with FromSeq, replays the stream's
// events after it, then continues live with no gap and no duplicate. It
// returns the log head at registration: without FromSeq, exactly the events
// after it are delivered.
func (h *Hub) Subscribe(ctx context.Context, log Log, req SubscribeRequest) (*Subscription, int64, error) {
	if req.QueueLimit <= 0 {
		req.QueueLimit = 4096
	}
	if req.ReplayLimit <= 0 {
		req.ReplayLimit = 1000
	}
	sub := &Subscription{
		id: req.ID, subject: req.Subject, stream: req.Stream, codec: req.Codec,
		out: req.Out, limit: req.QueueLimit, onClosed: req.OnClosed,
	}
	sub.written = sub.frameWritten
	// Register before reading the head: every event committed after the
	// head is dispatched after this point and so reaches the buffer.
	h.add(sub)
	// The queries are short and run on a context that is not the caller's
	// (a long-lived connection's): the database driver registers a
	// callback on a cancellable context, and its table of callbacks would
	// stay for the context's life. The replay's wait for queue space does
	// watch ctx.
	qctx := context.WithoutCancel(ctx)
	head, err := log.Head(qctx)
	if err != nil {
		h.remove(sub)
		return nil, 0, fmt.Errorf("subscribe %s: read head: %w", req.Stream, err)
	}
	if req.FromSeq != nil {
		from := *req.FromSeq
		if from > head {
			h.remove(sub)
			return nil, head, fmt.Errorf("subscribe %s: from_seq %d is beyond the log head %d: %w", req.Stream, from, head, ErrResyncRequired)
		}
		// Recent events come from memory when the hub has dispatched
		// every event up to the head; older ones, or a tailer behind the
		// head, read the log.
		evs, ok := h.recent.read(req.Stream, from, head, req.ReplayLimit+1)
		if !ok {
			evs, err = log.ReadStream(qctx, req.Stream, from, head, req.ReplayLimit+1)
			if err != nil {
				h.remove(sub)
				return nil, 0, fmt.Errorf("subscribe %s: replay: %w", req.Stream, err)
			}
		}
		if len(evs) > req.ReplayLimit {
			h.remove(sub)
			return nil, head, fmt.Errorf("subscribe %s: more than %d events after from_seq %d: %w", req.Stream, req.ReplayLimit, from, ErrResyncRequired)
		}
		for i := range evs {
			p := Prepared{Event: &evs[i]}
			body, err := h.cache.body(&p, sub.codec)
			if err != nil {
				continue
			}
			// The replay waits for queue space rather than overflowing: it
			// is bounded by ReplayLimit, and the client asked for it.
			if err := sub.waitSpace(ctx); err != nil {
				h.remove(sub)
				sub.markClosed("")
				return nil, head, fmt.Errorf("subscribe %s: replay: %w", req.Stream, err)
			}
			sub.mu.Lock()
			ok := sub.sendLocked(evs[i].Seq, body)
			if ok {
				sub.replayed++
			}
			sub.mu.Unlock()
			if !ok {
				h.remove(sub)
				sub.notifyClosed()
				return sub, head, nil
			}
		}
	}
	if !sub.goLive(head) {
		h.remove(sub)
		sub.notifyClosed()
	}
	return sub, head, nil
}

// Unsubscribe removes sub without notifying the client. It reports whether
// sub was still open.
func (h *Hub) Unsubscribe(sub *Subscription) bool {
	open := sub.markClosed("")
	h.remove(sub)
	return open
}

// goLive sends the buffered live events after head and switches to live
// delivery. It returns false when the subscription had to be closed.
func (s *Subscription) goLive(head int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == subClosed {
		return s.reason == ""
	}
	if head > s.last {
		s.last = head
	}
	buf := s.buffer
	s.buffer = nil
	s.state = subLive
	for _, b := range buf {
		if b.seq <= s.last {
			continue
		}
		if !s.sendLocked(b.seq, b.body) {
			return false
		}
	}
	return true
}

// deliver offers one dispatched event; it returns false when the
// subscription overflowed and must be removed.
func (s *Subscription) deliver(p *Prepared, cache *bodyCache) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := p.Event.Seq
	if s.state == subClosed || seq <= s.last {
		return true
	}
	body, err := cache.body(p, s.codec)
	if err != nil {
		return true
	}
	if s.state == subBuffering {
		if len(s.buffer) >= s.limit {
			s.state, s.reason = subClosed, ReasonLagging
			s.buffer = nil
			return false
		}
		s.buffer = append(s.buffer, buffered{seq: seq, body: body})
		return true
	}
	return s.sendLocked(seq, body)
}

// sendLocked queues one event frame, or closes the subscription as lagging.
func (s *Subscription) sendLocked(seq int64, body []byte) bool {
	if s.state == subClosed {
		return false
	}
	if s.pending >= s.limit {
		s.state, s.reason = subClosed, ReasonLagging
		return false
	}
	if !s.out.TrySendSpliced(MethodEvent, s.id, body, s.written) {
		s.state, s.reason = subClosed, ReasonLagging
		return false
	}
	s.pending++
	s.last = seq
	return true
}

func (s *Subscription) frameWritten() {
	s.mu.Lock()
	s.pending--
	drained := s.drained
	s.mu.Unlock()
	if drained != nil {
		select {
		case drained <- struct{}{}:
		default:
		}
	}
}

// waitSpace waits until the client's queue has room for one more frame.
func (s *Subscription) waitSpace(ctx context.Context) error {
	for {
		s.mu.Lock()
		full := s.pending >= s.limit && s.state != subClosed
		if full && s.drained == nil {
			s.drained = make(chan struct{}, 1)
		}
		drained := s.drained
		s.mu.Unlock()
		if !full {
			return nil
		}
		select {
		case <-drained:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// markClosed closes the subscription with reason ("" for an unsubscribe); it
// reports whether it was open.
func (s *Subscription) markClosed(reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == subClosed {
		return false
	}
	s.state, s.reason, s.buffer = subClosed, reason, nil
	return true
}

// notifyClosed tells the owner why the server closed the subscription.
func (s *Subscription) notifyClosed() {
	s.mu.Lock()
	reason := s.reason
	s.mu.Unlock()
	if reason != "" && s.onClosed != nil {
		s.onClosed(s, reason)
	}
}
