package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/subqueue"
	"github.com/ballet/gateway/protocol"
)

// Reasons a subscription is closed by the server (stream.closed).
const (
	ReasonLagging   = "lagging"
	ReasonForbidden = "forbidden"
	ReasonNotFound  = "not_found"
)

// ErrResyncRequired: from_seq is older than the replay limit allows, or
// beyond the log's head. The hub's is an *Error saying which.
var ErrResyncRequired = errors.New("streams: resync required")

// Error is a refusal whose Detail names only what the client sent or may
// see; it matches its sentinel (ErrResyncRequired, ErrBadTypes) with
// errors.Is.
type Error struct {
	Err    error
	Detail string
}

func (e *Error) Error() string { return e.Detail + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// errorf returns an *Error matching sentinel with a formatted detail.
func errorf(sentinel error, format string, args ...any) error {
	return &Error{Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// Defaults of SubscribeRequest.
const (
	DefaultQueueLimit  = 4096 // QueueLimit's
	DefaultReplayLimit = 1000 // ReplayLimit's
)

// Sender is the connection a subscription writes to. TrySendSpliced queues
// the notification method with params body plus "subscription": sub (the
// connection builds the frame, so the shared body is never copied per
// subscriber); it must not block, and done is called once the frame is
// written or dropped.
//
// TrySendSplicedBatch does the same for several bodies, all or none, and
// none when they are more than room (the subscription's free queue space).
type Sender interface {
	TrySendSpliced(method, sub string, body []byte, done func()) bool
	TrySendSplicedBatch(method, sub string, bodies [][]byte, room int, done func()) bool
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
	// Types, when set, selects the events delivered, live and replayed; the seqs
	// delivered stay increasing, with gaps where events were left out.
	Types *TypeFilter
	// QueueLimit bounds frames queued for the client (zero means DefaultQueueLimit); more
	// closes the subscription with ReasonLagging.
	QueueLimit int
	// ReplayBytes bounds the bytes of the replayed events queued at once (default 256 KiB,
	// at least one event): the replay sends them in chunks, each once the one before was
	// written, so that a replay of large events never holds more than that for a slow client.
	ReplayBytes int
	// ReplayLimit bounds the events replayed from FromSeq (zero means DefaultReplayLimit);
	// more is ErrResyncRequired. With Types it counts the stream's events
	// after FromSeq, selected or not: a replay costs reading all of them.
	ReplayLimit int
	// OnClosed is called once when the server closes the subscription
	// (not on Unsubscribe), after it left the hub. It must not block.
	OnClosed func(sub *Subscription, reason string)
	// Admit, when set, checks that the subscriber may read the stream;
	// Subscribe fails with its error. It is called once the subscription is
	// registered and the head read, before anything is delivered, so that
	// access cannot be lost unseen between the check and the registration:
	// a change that takes access away (member.revoked, project.deleted),
	// committed with the access it removes, either is committed before the
	// check, which sees it, or after it, and then comes after the head and
	// is dispatched to a registered subscription, which it closes. Nothing
	// replayed comes after it. The check must read what writers commit (the
	// primary), never a copy that may lag behind the events dispatched.
	Admit func(ctx context.Context) error
	// Replay, when set, is called with FromSeq once access is checked and
	// before the replay reads anything; Subscribe fails with its error.
	// Otherwise read, unless nil, is called once with the number of the
	// stream's events the replay read (with Types, selected or not; more
	// than ReplayLimit when it fails for that), before any is sent: what
	// the replay cost.
	Replay func(ctx context.Context) (read func(n int), err error)
}

// Subscription is one client's interest in one stream.
type Subscription struct {
	// Set by Subscribe before the hub holds it, and read-only after.
	id       string
	subject  string
	stream   Stream
	codec    codec.Codec
	out      Sender
	types    *TypeFilter
	onClosed func(*Subscription, string)

	// mu guards the fields below but queue (atomic).
	mu       sync.Mutex
	state    subState
	source   replaySource // where the replay read; in state's padding
	reason   string
	last     int64 // highest seq sent (or covered by the replay)
	replayed int   // events sent from the replay
	buffer   []buffered
	// queue counts the frames handed to out and not yet written, at most
	// QueueLimit; closed with the subscription. out may write a frame, and
	// count it written, while sendLocked holds mu.
	queue subqueue.Queue
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

// Where a replay reads its events (Subscription.ReplaySource).
const (
	ReplayMemory   = "memory"   // the hub's recent events
	ReplayDatabase = "database" // the log
)

// replaySource is where a subscription's replay read: an index of replaySources.
type replaySource uint8

const (
	noReplay replaySource = iota
	fromMemory
	fromDatabase
)

var replaySources = [...]string{noReplay: "", fromMemory: ReplayMemory, fromDatabase: ReplayDatabase}

// ReplaySource returns where the replay read its events, ReplayMemory or ReplayDatabase, or
// "" when there was none.
func (s *Subscription) ReplaySource() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return replaySources[s.source]
}

// Subscribe registers a subscription and, with FromSeq, replays the stream's
// events after it, then continues live with no gap and no duplicate. It
// returns the log head at registration: without FromSeq, exactly the events
// after it are delivered. With Admit, nothing is delivered before it passes.
func (h *Hub) Subscribe(ctx context.Context, log Log, req SubscribeRequest) (*Subscription, int64, error) {
	req.withDefaults()
	sub := &Subscription{
		id: req.ID, subject: req.Subject, stream: req.Stream, codec: req.Codec,
		out: req.Out, types: req.Types, onClosed: req.OnClosed,
	}
	sub.queue.Init(req.QueueLimit)
	if req.FromSeq != nil {
		// The client has every event up to from_seq: none of them is sent again.
		sub.last = *req.FromSeq
	}
	// Register before reading the head: every event committed after the
	// head is dispatched after this point and so reaches the buffer.
	h.add(sub)
	head, live, err := h.catchUp(ctx, log, sub, &req)
	if err != nil {
		// The caller is answered the error: the subscription leaves unannounced.
		sub.markClosed("")
		h.remove(sub)
		return nil, head, err
	}
	if !live || !sub.goLive(head) {
		h.remove(sub)
		sub.notifyClosed()
	}
	return sub, head, nil
}

func (r *SubscribeRequest) withDefaults() {
	if r.QueueLimit <= 0 {
		r.QueueLimit = DefaultQueueLimit
	}
	if r.ReplayLimit <= 0 {
		r.ReplayLimit = DefaultReplayLimit
	}
	if r.ReplayBytes <= 0 {
		r.ReplayBytes = 256 << 10
	}
}

// catchUp reads the head, admits the registered sub and replays what it asked
// for; live is false when the replay closed it. Subscribe undoes the
// registration when it fails.
func (h *Hub) catchUp(ctx context.Context, log Log, sub *Subscription, req *SubscribeRequest) (head int64, live bool, err error) {
	// The queries are short and run on a context that is not the caller's
	// (a long-lived connection's): the database driver registers a
	// callback on a cancellable context, and its table of callbacks would
	// stay for the context's life. The replay's wait for queue space does
	// watch ctx.
	qctx := context.WithoutCancel(ctx)
	head, err = h.admitAt(qctx, log, req)
	if err != nil || req.FromSeq == nil {
		return head, true, err
	}
	return h.replay(ctx, qctx, log, sub, req, head)
}

// admitAt returns the head the subscription starts after once Admit passed,
// or, failing, the head its error names (0 for none).
func (h *Hub) admitAt(qctx context.Context, log Log, req *SubscribeRequest) (int64, error) {
	head, err := log.Head(qctx)
	if err != nil {
		return 0, fmt.Errorf("subscribe %s: read head: %w", req.Stream, err)
	}
	f, following := log.(Follower)
	following = following && f.Tailing()
	if following {
		// A log read from standbys may answer with a head behind what
		// was dispatched already (a pooler in front of several, a
		// standby that just restarted); events up to what was dispatched
		// before the registration are not delivered live, so the head
		// covers them.
		head = max(head, h.recent.position())
	}
	// Admitted only now, with the head known: see SubscribeRequest.Admit.
	if req.Admit != nil {
		if err := req.Admit(qctx); err != nil {
			return 0, fmt.Errorf("subscribe %s: %w", req.Stream, err)
		}
	}
	if req.FromSeq == nil || *req.FromSeq <= head {
		return head, nil
	}
	from := *req.FromSeq
	// Beyond the head means the database was reset, unless the log
	// reads a copy that lags the primary: then the client has seen
	// every event up to from_seq elsewhere, nothing is to be replayed,
	// and the events after it arrive live as the copy replays them.
	if !following {
		return head, errorf(ErrResyncRequired, "subscribe %s: from_seq %d is beyond the log head %d", req.Stream, from, head)
	}
	primary, err := f.PrimaryHead(qctx)
	if err != nil {
		return 0, fmt.Errorf("subscribe %s: read the primary's head: %w", req.Stream, err)
	}
	if from > primary {
		return primary, errorf(ErrResyncRequired, "subscribe %s: from_seq %d is beyond the log head %d", req.Stream, from, primary)
	}
	return from, nil
}

// replay sends sub the stream's events from FromSeq up to head; live is
// false when sub was closed meanwhile.
func (h *Hub) replay(ctx, qctx context.Context, log Log, sub *Subscription, req *SubscribeRequest, head int64) (int64, bool, error) {
	from := *req.FromSeq
	var read func(int)
	if req.Replay != nil {
		var err error
		if read, err = req.Replay(ctx); err != nil {
			return head, false, fmt.Errorf("subscribe %s: %w", req.Stream, err)
		}
	}
	// Recent events come from memory when the hub has dispatched
	// every event up to the head; older ones, or a tailer behind the
	// head, read the log.
	var err error
	evs, ok := h.recent.read(req.Stream, from, head, req.ReplayLimit+1)
	source := fromMemory
	if !ok {
		source = fromDatabase
		evs, err = log.ReadStream(qctx, req.Stream, from, head, req.ReplayLimit+1)
	}
	sub.mu.Lock()
	sub.source = source
	sub.mu.Unlock()
	if read != nil {
		read(len(evs))
	}
	if err != nil {
		return 0, false, fmt.Errorf("subscribe %s: replay: %w", req.Stream, err)
	}
	if len(evs) > req.ReplayLimit {
		return head, false, errorf(ErrResyncRequired, "subscribe %s: more than %d events after from_seq %d", req.Stream, req.ReplayLimit, from)
	}
	// In chunks that go out together, each as large as the client's
	// queue has room for and at most ReplayBytes, sent once the one
	// before was written: the replay waits for the client rather
	// than overflowing, since it is bounded by ReplayLimit and the
	// client asked for it.
	bodies := make([][]byte, 0, min(len(evs), replayChunk))
	for i := 0; i < len(evs); {
		if err := sub.queue.Wait(ctx, i > 0); err != nil {
			return head, false, fmt.Errorf("subscribe %s: replay: %w", req.Stream, err)
		}
		sub.mu.Lock()
		room := min(sub.queue.Room(), replayChunk)
		bodies = bodies[:0]
		var last int64
		size := 0
		for ; i < len(evs) && len(bodies) < room && (size < req.ReplayBytes || len(bodies) == 0); i++ {
			if !sub.types.Match(evs[i].Type) {
				continue
			}
			p := Prepared{Event: &evs[i]}
			if body, err := h.cache.body(&p, sub.codec); err == nil {
				bodies = append(bodies, body)
				size += len(body)
				last = evs[i].Seq
			}
		}
		ok := sub.state != subClosed && (len(bodies) == 0 || sub.sendBatchLocked(last, bodies))
		if ok {
			sub.replayed += len(bodies)
		}
		sub.mu.Unlock()
		if !ok {
			return head, false, nil
		}
	}
	return head, true, nil
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
	if s.state == subClosed || seq <= s.last || !s.types.Match(p.Event.Type) {
		return true
	}
	body, err := cache.body(p, s.codec)
	if err != nil {
		return true
	}
	if s.state == subBuffering {
		return s.bufferLocked(seq, body)
	}
	return s.sendLocked(seq, body)
}

// bufferLocked keeps a live event while the replay runs, or closes the
// subscription as lagging when the buffer is full.
func (s *Subscription) bufferLocked(seq int64, body []byte) bool {
	if len(s.buffer) >= s.queue.Limit() {
		s.closeLocked(ReasonLagging)
		return false
	}
	s.buffer = append(s.buffer, buffered{seq: seq, body: body})
	return true
}

// deliverRun offers a run of dispatched events of the subscription's stream,
// in seq order; they go out together. It returns false when the
// subscription overflowed and must be removed. bodies is scratch space.
func (s *Subscription) deliverRun(ps []*Prepared, cache *bodyCache, bodies *[][]byte) bool {
	if len(ps) == 1 {
		return s.deliver(ps[0], cache)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == subClosed {
		return true
	}
	out := (*bodies)[:0]
	defer func() {
		clear(out)
		*bodies = out[:0]
	}()
	last := s.last
	for _, p := range ps {
		seq := p.Event.Seq
		if seq <= last || !s.types.Match(p.Event.Type) {
			continue
		}
		body, err := cache.body(p, s.codec)
		if err != nil {
			continue
		}
		if s.state == subBuffering {
			if !s.bufferLocked(seq, body) {
				return false
			}
			continue
		}
		out = append(out, body)
		last = seq
	}
	if len(out) == 0 {
		return true
	}
	return s.sendBatchLocked(last, out)
}

// sendBatchLocked queues event frames together, the last of seq last, or
// closes the subscription as lagging when its queue has no room for all.
func (s *Subscription) sendBatchLocked(last int64, bodies [][]byte) bool {
	if len(bodies) == 1 {
		return s.sendLocked(last, bodies[0])
	}
	if s.state == subClosed {
		return false
	}
	room, ok := s.queue.Reserve(len(bodies))
	if !ok {
		s.closeLocked(ReasonLagging)
		return false
	}
	if !s.out.TrySendSplicedBatch(protocol.StreamEvent, s.id, bodies, room, s.queue.Written()) {
		s.queue.Unreserve(len(bodies))
		s.closeLocked(ReasonLagging)
		return false
	}
	s.last = last
	return true
}

// replayChunk is the most replayed events sent together.
const replayChunk = 256

// sendLocked queues one event frame, or closes the subscription as lagging.
func (s *Subscription) sendLocked(seq int64, body []byte) bool {
	if s.state == subClosed {
		return false
	}
	if _, ok := s.queue.Reserve(1); !ok {
		s.closeLocked(ReasonLagging)
		return false
	}
	if !s.out.TrySendSpliced(protocol.StreamEvent, s.id, body, s.queue.Written()) {
		s.queue.Unreserve(1)
		s.closeLocked(ReasonLagging)
		return false
	}
	s.last = seq
	return true
}

// markClosed closes the subscription with reason ("" for an unsubscribe); it
// reports whether it was open.
func (s *Subscription) markClosed(reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == subClosed {
		return false
	}
	s.closeLocked(reason)
	return true
}

// closeLocked is every move to subClosed: the queue closes with it, which ends
// a replay's wait for room.
func (s *Subscription) closeLocked(reason string) {
	s.state, s.reason, s.buffer = subClosed, reason, nil
	s.queue.Close()
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
