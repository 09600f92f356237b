package presence

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ballet/gateway/protocol"
)

// Defaults of Options.
const (
	DefaultWindow     = 150 * time.Millisecond
	DefaultMaxMembers = 1000
)

const (
	// retryAfter is how long a failed flush or read waits before it is tried again.
	retryAfter = time.Second
	// storeTimeout bounds one flush or read of the store.
	storeTimeout = 5 * time.Second
)

// Count is a replica's connections of a subject on a stream; 0 means none.
type Count struct {
	Stream      string
	Subject     string
	Connections int
}

// Store shares presence between replicas. Flush writes this replica's counts (0 removes) and
// wakes the other replicas' registries for the streams where a subject appeared or vanished;
// Read returns, per stream, the subjects present through the other live replicas (at most
// limit+1 of them, the first in bytewise order) with their connections; Subscribe calls fn
// with the streams changed elsewhere, nil meaning any (notifications may have been lost).
type Store interface {
	Flush(ctx context.Context, counts []Count) error
	Read(ctx context.Context, streams []string, limit int) (map[string]map[string]int, error)
	Subscribe(fn func(streams []string)) (cancel func())
}

// Sink receives the presence changes of one presence subscription. PresenceChanged must not
// block nor call Leave; it returns false when the subscriber cannot take the notice: the
// registry then delivers nothing more to it and calls PresenceLost, with no lock held, whose
// owner should Leave.
type Sink interface {
	PresenceChanged(n *Notice) bool
	PresenceLost()
}

// Member is a subject present on a stream and its connections there, on every replica.
type Member = protocol.PresenceMember

// Options configure a Registry. A nil *Options means defaults.
type Options struct {
	// Store shares presence with other replicas; nil keeps it in this process (dev).
	Store Store
	// Window coalesces changes: a stream's watchers hear at most one change per window, a
	// subject that leaves and comes back within it (on any replica) produces none, and this
	// replica writes to the store at most once per window. A subject is reported left once
	// it has been gone for two windows. Default DefaultWindow.
	Window time.Duration
	// MaxMembers bounds every member list: presence.get answers at most this many (the first
	// in bytewise subject order, and says it truncated), and watchers follow only these.
	// Default DefaultMaxMembers.
	MaxMembers int
	// OnMembers, when set, hears +1 when a subject becomes present on a stream through this
	// replica and -1 when it stops (a gauge of this replica's members). Called under a lock:
	// it must be quick.
	OnMembers func(stream string, delta int)
	// Logger receives store errors. Default slog.Default().
	Logger *slog.Logger
}

// Registry is one replica's presence: its own members, the views of the streams it has
// watchers for, and the goroutine that refreshes them. It is safe for concurrent use.
type Registry struct {
	// Set by New and read-only after.
	store       Store
	window      time.Duration
	max         int
	onMembers   func(string, int)
	logger      *slog.Logger
	unsubscribe func()

	// mu guards the fields below, every streamState, and Presence's fields marked (r.mu).
	mu        sync.Mutex
	streams   map[string]*streamState
	scheduled map[*streamState]struct{}
	dirty     map[key]struct{} // this replica's counts to write to the store
	flushAt   time.Time        // the next flush, at the earliest
	failing   bool             // the last store call failed (logged once)
	running   bool             // a worker goroutine runs
	timer     *time.Timer      // starts the worker for the next due work
	armedAt   time.Time        // when timer fires; zero when it is not armed
	closed    bool
	wg        sync.WaitGroup // the worker goroutine; not under mu
}

type key struct{ stream, subject string }

// streamState is a stream with members or watchers on this replica. Its fields are guarded
// by the registry's mu, not a lock of its own: a stream's state changes together with the
// registry's tables that hold it (streams, scheduled), and the worker's round over many
// streams reads them all in one critical section. name is read-only.
type streamState struct {
	name     string
	watchers map[*Presence]struct{}    // the refreshes are for them: none, none are done
	local    map[string]map[string]int // subject → connection → presence subscriptions
	remote   map[string]int            // subject → connections elsewhere, as last read
	stale    bool                      // remote must be read (new, or changed elsewhere)
	reading  bool                      // the worker is reading remote
	// view is what the watchers were told: the members, each with the time it was first
	// found missing (zero while present); it is reported left two windows after that.
	view        map[string]time.Time
	unprimed    int       // watchers still waiting for their snapshot
	due         time.Time // the next refresh; zero when none is scheduled
	lastRefresh time.Time
	gone        bool // no longer in the registry
}

// Presence is one presence subscription: its subject is present on the stream (Join,
// Enter), its sink follows the stream (Join, Watch), until Leave.
type Presence struct {
	// Set by join, before the Presence is returned, and read-only after.
	r       *Registry
	st      *streamState
	subject string
	conn    string
	sink    Sink

	mu     sync.Mutex // held while the sink is called; Leave takes it to stop deliveries
	closed bool       // (mu) no more deliveries

	primed bool // had its snapshot, or watches nothing (r.mu)
	left   bool // (r.mu)
}

// WithDefaults returns o with its zero fields set to their defaults, as New applies them.
func (o Options) WithDefaults() Options {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.MaxMembers <= 0 {
		o.MaxMembers = DefaultMaxMembers
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// New returns a registry; with a store, it follows the store's notifications until Close.
func New(opts *Options) *Registry {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.WithDefaults()
	r := &Registry{
		store: o.Store, window: o.Window, max: o.MaxMembers, onMembers: o.OnMembers, logger: o.Logger,
		streams: map[string]*streamState{}, scheduled: map[*streamState]struct{}{}, dirty: map[key]struct{}{},
	}
	if r.store != nil {
		r.unsubscribe = r.store.Subscribe(r.remoteChanged)
	}
	return r
}

// Close stops following the store and waits for the registry's goroutine; presence
// subscriptions get no more changes. Safe to call twice.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	if r.unsubscribe != nil {
		r.unsubscribe()
	}
	r.wg.Wait()
	return nil
}

// Join makes subject present on stream through connection conn (any id unique per
// connection) and delivers the stream's presence changes to sink, the first one a snapshot,
// until Leave.
func (r *Registry) Join(stream, subject, conn string, sink Sink) *Presence {
	return r.join(stream, subject, conn, sink)
}

// Enter makes subject present on stream through connection conn until Leave, like Join,
// without following the stream's changes.
func (r *Registry) Enter(stream, subject, conn string) *Presence {
	return r.join(stream, subject, conn, nil)
}

// Watch delivers the stream's presence changes to sink, the first one a snapshot, until
// Leave, like Join, without making anyone present.
func (r *Registry) Watch(stream string, sink Sink) *Presence {
	return r.join(stream, "", "", sink)
}

// join adds a member (subject not empty), a watcher (sink not nil) or both.
func (r *Registry) join(stream, subject, conn string, sink Sink) *Presence {
	p := &Presence{r: r, subject: subject, conn: conn, sink: sink, primed: sink == nil}
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.streams[stream]
	if st == nil {
		st = &streamState{
			name: stream, watchers: map[*Presence]struct{}{}, local: map[string]map[string]int{},
			view: map[string]time.Time{},
		}
		r.streams[stream] = st
	}
	p.st = st
	if sink != nil {
		if len(st.watchers) == 0 {
			// What was read before, while nobody watched, is old.
			st.stale = r.store != nil
		}
		st.watchers[p] = struct{}{}
		st.unprimed++
	}
	if subject != "" {
		conns := st.local[subject]
		if conns == nil {
			conns = map[string]int{}
			st.local[subject] = conns
			if r.onMembers != nil {
				r.onMembers(stream, 1)
			}
		}
		if conns[conn] == 0 {
			r.markDirtyLocked(stream, subject)
		}
		conns[conn]++
	}
	r.scheduleLocked(st, time.Now())
	return p
}

// Leave ends the presence subscription: no change is delivered to its sink once Leave
// returns, and its subject leaves the stream if this was its last one anywhere. Safe to call
// twice.
func (p *Presence) Leave() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.left {
		return
	}
	p.left = true
	st := p.st
	if p.sink != nil {
		delete(st.watchers, p)
		if !p.primed {
			st.unprimed--
		}
		if len(st.watchers) == 0 {
			// Nobody to tell: the view starts again with the next watcher.
			clear(st.view)
			delete(r.scheduled, st)
			st.due = time.Time{}
		}
	}
	if p.subject != "" {
		conns := st.local[p.subject]
		if conns[p.conn]--; conns[p.conn] <= 0 {
			delete(conns, p.conn)
			r.markDirtyLocked(st.name, p.subject)
		}
		if len(conns) == 0 {
			delete(st.local, p.subject)
			if r.onMembers != nil {
				r.onMembers(st.name, -1)
			}
			r.scheduleLocked(st, time.Now())
		}
	}
	if len(st.watchers) == 0 && len(st.local) == 0 {
		st.gone = true
		delete(r.streams, st.name)
		delete(r.scheduled, st)
	}
}

// Members returns the subjects present on stream on every replica, in bytewise order, with
// their connections: at most MaxMembers, and truncated when there are more. Other replicas'
// members are read from the store now; this replica's are current.
func (r *Registry) Members(ctx context.Context, stream string) (members []Member, truncated bool, err error) {
	var remote map[string]int
	if r.store != nil {
		ctx, cancel := context.WithTimeout(ctx, storeTimeout)
		got, err := r.store.Read(ctx, []string{stream}, r.max)
		cancel()
		if err != nil {
			return nil, false, err
		}
		remote = got[stream]
	}
	r.mu.Lock()
	var local map[string]map[string]int
	if st := r.streams[stream]; st != nil {
		local = st.local
	}
	members = merge(local, remote)
	r.mu.Unlock()
	if len(members) > r.max {
		return members[:r.max], true, nil
	}
	return members, false, nil
}

// merge returns the members of this replica (local) and the others (remote), sorted by
// subject.
func merge(local map[string]map[string]int, remote map[string]int) []Member {
	counts := make(map[string]int, len(local)+len(remote))
	for subject, conns := range local {
		counts[subject] += len(conns)
	}
	for subject, n := range remote {
		counts[subject] += n
	}
	out := make([]Member, 0, len(counts))
	for subject, n := range counts {
		out = append(out, Member{Subject: subject, Connections: n})
	}
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case a.Subject < b.Subject:
			return -1
		case a.Subject > b.Subject:
			return 1
		}
		return 0
	})
	return out
}

// markDirtyLocked queues this replica's count of subject on stream for the store.
func (r *Registry) markDirtyLocked(stream, subject string) {
	if r.store != nil {
		r.dirty[key{stream, subject}] = struct{}{}
		r.wantLocked(r.flushAt)
	}
}

// scheduleLocked asks for a refresh of st at at, or a window after its last refresh if that
// is later, so that watchers hear at most one change per window.
func (r *Registry) scheduleLocked(st *streamState, at time.Time) {
	if st.gone || len(st.watchers) == 0 {
		return
	}
	if !st.lastRefresh.IsZero() {
		if next := st.lastRefresh.Add(r.window); at.Before(next) {
			at = next
		}
	}
	if st.due.IsZero() || at.Before(st.due) {
		st.due = at
		r.scheduled[st] = struct{}{}
		r.wantLocked(at)
	}
}

// remoteChanged is the store's notification: streams changed on other replicas (nil: any).
func (r *Registry) remoteChanged(streams []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	now := time.Now()
	mark := func(st *streamState) {
		st.stale = true
		r.scheduleLocked(st, now)
	}
	if streams == nil {
		for _, st := range r.streams {
			mark(st)
		}
	}
	for _, name := range streams {
		if st := r.streams[name]; st != nil {
			mark(st)
		}
	}
}
