package streams

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/protocol"
)

// Reasons a subscription is closed by the server (stream.closed).
const (
	ReasonLagging   = "lagging"
	ReasonForbidden = "forbidden"
	ReasonNotFound  = "not_found"
)

// ErrResyncRequired: from_seq is older than the replay limit allows, or
// beyond the log's head. The hub's is a *fault.Error whose detail says
// which.
var ErrResyncRequired = fault.New(fault.Resync, "streams: resync required")

// DefaultReplayLimit is SubscribeRequest.ReplayLimit's default.
const DefaultReplayLimit = 1000

// Source is a subscription as its connection's writer sees it: the writer pulls its next
// stream.event frames when the socket can take more. Notification is the method and
// subscription id of its frames; Pull appends to params the next events' bodies, about limit
// bytes of them (at least one when it has any), and reports whether it has more.
type Source interface {
	Notification() (method, sub string)
	Pull(params [][]byte, max int) ([][]byte, bool)
}

// Sender is the connection a subscription delivers to. Ready tells it that src has events to
// pull: it pulls them, now on the caller's goroutine or later on its writer's, until Pull
// reports no more, and then waits for the next Ready. Ready must not block on the peer.
type Sender interface {
	Ready(src Source)
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
	// ReplayLimit bounds the events replayed from FromSeq (zero means DefaultReplayLimit);
	// more is ErrResyncRequired. With Types it counts the stream's events
	// after FromSeq, selected or not: a replay costs reading all of them. (How far behind the
	// window a subscription may fall and still catch up is HubOptions.CatchUpLimit.)
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
	// CatchUp, when set, paces the catch-ups from the log (the subscription fell behind the
	// window, or a replay goes on past its first page): it is asked, with read 0, before each
	// page is read, and returns how long the read must wait (its subject's replay budget is
	// overdrawn); then it is told the events the page read, what it cost. It must not block.
	CatchUp func(read int) time.Duration
}

// Subscription is one client's interest in one stream: a position in the stream. Its
// connection pulls the events after the position from the hub's window (Pull); one that fell
// behind the window reads them from the log first.
type Subscription struct {
	// Set by Subscribe before the hub holds it, and read-only after.
	id       string
	subject  string
	stream   Stream
	codec    codec.Codec
	out      Sender
	types    *TypeFilter  // nil: every event
	group    *filterGroup // the subscriptions of the stream with equal types; nil without
	onClosed func(*Subscription, string)
	hub      *Hub
	log      Log
	catchUp  func(int) time.Duration

	// ready is set while the subscription is in its connection's list of sources to pull
	// (Sender.Ready was called and Pull has not yet reported that it has no more).
	ready atomic.Bool

	// mu guards the fields below.
	mu       sync.Mutex
	state    subState
	source   replaySource // where the replay read; in state's padding
	reason   string
	last     int64 // the position: every event of the stream up to it was sent or left out
	replayed int   // events sent from the replay
	// behind is events read from the log, after last, sent before the window's: a replay
	// from the log, or a catch-up. Once they are sent the position is behindTo.
	behind   []Event
	behindTo int64
	// nextRead is how many events the next page read from the log asks for (cutPage).
	nextRead int
	// pageBytes is what behind takes, counted in the hub's pages (pages.go) as its pageGen'th
	// page; pageElem is its place there, guarded by the hub's pages.mu.
	pageBytes int
	pageGen   uint64
	pageElem  *list.Element
	// replayHead is the head a replay went up to (0 for none): its events do not count
	// against the hub's CatchUpLimit when a catch-up reads them. Set while starting; a
	// catch-up, which comes later, reads it without mu.
	replayHead int64
	// endAt, when not 0, is the seq of the event that took the subscriber's access away
	// (endReason): the subscription sends what it has up to it, then closes.
	endAt     int64
	endReason string
}

type subState uint8

const (
	subStarting   subState = iota // registered; nothing is pulled until Subscribe returns
	subLive                       // pulled from its position
	subCatchingUp                 // behind the window: reading the log
	subClosed
)

// ID returns the client's subscription id.
func (s *Subscription) ID() string { return s.id }

// Subject returns who subscribed.
func (s *Subscription) Subject() string { return s.subject }

// Stream returns the subscribed stream.
func (s *Subscription) Stream() Stream { return s.stream }

// Replayed returns how many events the subscription replayed from FromSeq (with Types and a
// replay from the log, those of its first page).
func (s *Subscription) Replayed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replayed
}

// Position returns the seq up to which the subscription has been sent its stream's events.
func (s *Subscription) Position() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
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
// The replay is not sent before Subscribe returns: the connection pulls it.
func (h *Hub) Subscribe(ctx context.Context, log Log, req SubscribeRequest) (*Subscription, int64, error) {
	req.withDefaults()
	sub := &Subscription{
		id: req.ID, subject: req.Subject, stream: req.Stream, codec: req.Codec,
		out: req.Out, types: req.Types, onClosed: req.OnClosed,
		hub: h, log: log, catchUp: req.CatchUp, nextRead: catchUpFirstRead,
	}
	// Register before reading the head: every event committed after the
	// head is dispatched after this point, and the window holds it.
	h.add(sub)
	head, err := h.start(ctx, log, sub, &req)
	if req.FromSeq != nil {
		h.trimPages() // after a replay's first page from the log
	}
	if err != nil {
		// The caller is answered the error: the subscription leaves unannounced.
		sub.markClosed("")
		h.remove(sub)
		return nil, head, err
	}
	sub.mu.Lock()
	live := sub.state == subStarting
	if live {
		sub.state = subLive
	}
	sub.mu.Unlock()
	if !live {
		// Closed while subscribing: access lost after the check.
		h.remove(sub)
		sub.notifyClosed()
		return sub, head, nil
	}
	sub.wake()
	return sub, head, nil
}

func (r *SubscribeRequest) withDefaults() {
	if r.ReplayLimit <= 0 {
		r.ReplayLimit = DefaultReplayLimit
	}
}

// start reads the head, admits the registered sub and sets its position: the head, or
// FromSeq with what the replay needs. Subscribe undoes the registration when it fails.
func (h *Hub) start(ctx context.Context, log Log, sub *Subscription, req *SubscribeRequest) (int64, error) {
	// The queries are short and run on a context that is not the caller's
	// (a long-lived connection's): the database driver registers a
	// callback on a cancellable context, and its table of callbacks would
	// stay for the context's life.
	qctx := context.WithoutCancel(ctx)
	head, err := h.admitAt(qctx, log, req)
	if err != nil {
		return head, err
	}
	if req.FromSeq == nil {
		sub.mu.Lock()
		sub.last = head
		sub.mu.Unlock()
		return head, nil
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
		head = max(head, h.win.position())
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
		return head, fault.Errorf(ErrResyncRequired, "subscribe %s: from_seq %d is beyond the log head %d", req.Stream, from, head)
	}
	primary, err := f.PrimaryHead(qctx)
	if err != nil {
		return 0, fmt.Errorf("subscribe %s: read the primary's head: %w", req.Stream, err)
	}
	if from > primary {
		return primary, fault.Errorf(ErrResyncRequired, "subscribe %s: from_seq %d is beyond the log head %d", req.Stream, from, primary)
	}
	return from, nil
}

// replay sets sub's position to FromSeq once it has counted the stream's events from there
// to head: in the window when it holds them all (the connection then pulls them from there),
// otherwise read from the log and kept for the connection to pull first.
// It returns the head, or 0 when the log failed.
func (h *Hub) replay(ctx, qctx context.Context, log Log, sub *Subscription, req *SubscribeRequest, head int64) (int64, error) {
	from := *req.FromSeq
	var read func(int)
	if req.Replay != nil {
		var err error
		if read, err = req.Replay(ctx); err != nil {
			return head, fmt.Errorf("subscribe %s: %w", req.Stream, err)
		}
	}
	n, selected, inMemory := h.win.count(req.Stream, from, head, req.Types, req.ReplayLimit+1)
	source := fromMemory
	var evs []Event
	var err error
	upto, next := head, catchUpFirstRead
	if !inMemory {
		source = fromDatabase
		if c, ok := log.(Counter); ok {
			// Counted first; the first page read now, the rest as the client takes it
			// (catchup.go), so that a replay of large events holds a page, not the distance.
			n, err = c.CountStream(qctx, req.Stream, from, head, req.ReplayLimit+1)
			if err == nil && n <= req.ReplayLimit {
				evs, err = log.ReadStream(qctx, req.Stream, from, head, next)
			}
			var more bool
			if evs, more, next = cutPage(evs, next); more {
				// The rest is read once this page is sent. (Not the count: a count made
				// on a standby behind the one read may be short.)
				upto = evs[len(evs)-1].Seq
			}
		} else {
			evs, err = log.ReadStream(qctx, req.Stream, from, head, req.ReplayLimit+1)
			n = len(evs)
		}
		selected = n
		if req.Types != nil {
			selected = 0 // of the events read now
			for i := range evs {
				if req.Types.Match(evs[i].Type) {
					selected++
				}
			}
		}
	}
	if read != nil {
		read(n)
	}
	if err != nil {
		return 0, fmt.Errorf("subscribe %s: replay: %w", req.Stream, err)
	}
	if n > req.ReplayLimit {
		return head, fault.Errorf(ErrResyncRequired, "subscribe %s: more than %d events after from_seq %d", req.Stream, req.ReplayLimit, from)
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.source, sub.replayed, sub.last, sub.replayHead = source, selected, from, head
	if !inMemory {
		if evs == nil {
			evs = []Event{} // none: the position still moves to head
		}
		sub.behind, sub.behindTo, sub.nextRead = evs, upto, next
		sub.holdPageLocked(0)
	}
	return head, nil
}

// Unsubscribe removes sub without notifying the client. It reports whether
// sub was still open.
func (h *Hub) Unsubscribe(sub *Subscription) bool {
	open := sub.markClosed("")
	h.remove(sub)
	return open
}

// wake puts the subscription in its connection's list of sources to pull, unless it is
// there already.
func (s *Subscription) wake() {
	if s.ready.CompareAndSwap(false, true) {
		s.out.Ready(s)
	}
}

// Notification returns the method and the subscription id of the subscription's frames
// (Source).
func (s *Subscription) Notification() (method, sub string) { return protocol.StreamEvent, s.id }

// selects reports whether the subscription's filter selects the window's item it, asking its
// group, which matches it once for all its members.
func (s *Subscription) selects(it *item) bool {
	if s.group == nil {
		return true
	}
	return s.group.match(it)
}

// pullScan is the most events of the window one look at it takes.
const pullScan = 512

var itemSlices = sync.Pool{New: func() any { s := make([]*item, 0, pullScan); return &s }}

// Pull appends to params the bodies of the next events after the subscription's position,
// about max bytes of them, moves the position past them, and reports whether more are ready
// (Source). A subscription behind the window starts catching up from the log instead, and is
// woken once it has read it.
func (s *Subscription) Pull(params [][]byte, limit int) ([][]byte, bool) {
	h := s.hub
	sent, ended := 0, false
	defer func() {
		if sent > 0 && h.onDelivered != nil {
			h.onDelivered(sent)
		}
		if ended {
			s.notifyClosed() // after the frames pulled here, which the caller queues first
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != subLive {
		s.ready.Store(false)
		return params, false
	}
	size := 0
	if len(s.behind) > 0 {
		s.touchPageLocked()
	}
	for len(s.behind) > 0 {
		if size >= limit {
			return params, true
		}
		ev := &s.behind[0]
		if s.endAt > 0 && ev.Seq > s.endAt {
			s.behind = s.behind[:0]
			break
		}
		if ev.Seq > s.last {
			if s.types.Match(ev.Type) {
				p := Prepared{Event: ev}
				if body, err := h.cache.body(&p, s.codec); err == nil {
					params = append(params, body)
					size += len(body)
					sent++
				}
			}
			s.last = ev.Seq
		}
		s.behind[0] = Event{}
		s.behind = s.behind[1:]
	}
	if s.behind != nil {
		s.behind = nil
		s.last = max(s.last, s.behindTo)
		s.releasePageLocked()
	}
	sp := itemSlices.Get().(*[]*item)
	defer func() {
		clear(*sp)
		*sp = (*sp)[:0]
		itemSlices.Put(sp)
	}()
	for {
		items, more, gap, floor := h.win.next(s.stream, s.last, (*sp)[:0], pullScan)
		*sp = items
		if gap {
			if s.endAt > 0 {
				// Closing: what fell out of the window before the end is not read again.
				ended = s.endLocked()
				return params, false
			}
			s.startCatchUpLocked(floor)
			return params, false
		}
		for _, it := range items {
			if size >= limit {
				return params, true
			}
			if s.endAt > 0 && it.seq > s.endAt {
				more = false
				break
			}
			if s.selects(it) {
				if body, err := h.win.body(it, s.codec); err == nil {
					params = append(params, body)
					size += len(body)
					sent++
				}
			}
			s.last = it.seq
		}
		if !more {
			break
		}
	}
	// Nothing more: leave the connection's list, unless an event came meanwhile and its
	// wake-up found the subscription still there.
	s.ready.Store(false)
	if s.endAt > 0 {
		ended = s.endLocked()
		return params, false
	}
	if h.win.has(s.stream, s.last) && s.ready.CompareAndSwap(false, true) {
		return params, true
	}
	return params, false
}

// endLocked closes a subscription that has sent what it had up to endAt; it reports true.
func (s *Subscription) endLocked() bool {
	s.closeLocked(s.endReason)
	return true
}

// closeAfter closes the subscription with reason once it has sent its events up to seq, the
// event that took its access away; it reports whether it was open. One still starting closes
// now: Subscribe tells its caller.
func (s *Subscription) closeAfter(seq int64, reason string) bool {
	s.mu.Lock()
	switch {
	case s.state == subClosed || s.endAt > 0:
		s.mu.Unlock()
		return false
	case s.state == subStarting:
		s.closeLocked(reason)
		s.mu.Unlock()
		return true
	case s.state == subCatchingUp:
		// Its catch-up reads beyond seq: what it misses before seq is not read again.
		s.closeLocked(reason)
		s.mu.Unlock()
		s.notifyClosed()
		return true
	}
	s.endAt, s.endReason = seq, reason
	s.mu.Unlock()
	s.wake() // its connection pulls what is left up to seq, and Pull closes it there
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

// closeLocked is every move to subClosed: what it held from the log goes with it.
func (s *Subscription) closeLocked(reason string) {
	s.state, s.reason, s.behind = subClosed, reason, nil
	s.releasePageLocked()
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
