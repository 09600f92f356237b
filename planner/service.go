package planner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/tracker"
)

// Defaults of Options.
const (
	DefaultLease         = 3 * time.Second
	DefaultMaxRounds     = 16
	DefaultContextBudget = 100_000
	DefaultWatchQueue    = 4096
	DefaultToolTimeout   = 30 * time.Second
	DefaultResumeWindow  = 5 * time.Minute
	// DefaultTurnOutputs and DefaultTurnOutputBytes bound what is kept of one turn's output
	// for resuming (Options.TurnOutputs, TurnOutputBytes).
	DefaultTurnOutputs     = 10_000
	DefaultTurnOutputBytes = 1 << 20
	// DefaultMaxMessageBytes bounds a human message (Options.MaxMessageBytes).
	DefaultMaxMessageBytes = 32 << 10
	// DefaultTurnsPerSubject and DefaultSessionRate are a subject's limits
	// (Options.TurnsPerSubject, SessionRate).
	DefaultTurnsPerSubject = 4
	DefaultSessionRate     = 30
	// DefaultOutputWindow, DefaultOutputBatch and DefaultOutputBatchBytes gather the outputs
	// of a replica's turns into batches (Options.OutputWindow, OutputBatch, OutputBatchBytes).
	DefaultOutputWindow     = 20 * time.Millisecond
	DefaultOutputBatch      = 4096
	DefaultOutputBatchBytes = 4 << 20
	// SendKeyWindow is how long planner.send's idempotency keys are remembered.
	SendKeyWindow = 24 * time.Hour
	// abandonedTurn is how long the output of a turn that never ended (its replica and every
	// other died) is kept.
	abandonedTurn = 24 * time.Hour
)

// How long the planner waits on its store and bus for its own writes.
const (
	// writeTimeout bounds one write of a turn's state (its lease, an output batch, its error
	// and done) and its notification, mostly on a context that outlives the caller's so that
	// a turn being cancelled still ends in the store: a statement or two, answered in
	// milliseconds by a healthy database; long enough to ride out a failover's pause, short
	// enough that a turn does not wait on a dead database for long.
	writeTimeout = 10 * time.Second
	// storeMessageTimeout bounds storing one message of a turn's history, which may carry
	// a large content (a model's answer, a tool's result) within the turn's own context.
	storeMessageTimeout = 30 * time.Second
	// expireTimeout bounds one sweep of the outputs and keys past their windows, which may
	// delete many rows at once.
	expireTimeout = 30 * time.Second
)

// Options configure a Service. A nil *Options means defaults.
type Options struct {
	// Provider is the model. Default provider.NewScripted(nil), the development script.
	Provider provider.Provider
	// Bus carries output and cancel requests between replicas. Default a new MemoryBus,
	// which is right for one process only. The Service does not close it: close it after
	// the Service.
	Bus Bus
	// Lease is how long a turn's lease lasts without renewal (BALLET_PLANNER_LEASE); it is
	// renewed every Lease/3, and expired leases of watched sessions are looked for as often,
	// so a turn whose replica died ends for its watchers within about Lease × 4/3.
	// Default DefaultLease.
	Lease time.Duration
	// ResumeWindow is how long an ended turn's output can still be resumed
	// (BALLET_PLANNER_RESUME_WINDOW). Default DefaultResumeWindow.
	ResumeWindow time.Duration
	// TurnOutputs and TurnOutputBytes bound the output kept of one turn for resuming; past
	// either, a turn's further outputs (but its error and done) go out live only, and a
	// watcher that asks to resume the turn is told to reload: always while it runs, and
	// after it ended when an output after the watcher's offset was not kept. Defaults
	// DefaultTurnOutputs and DefaultTurnOutputBytes.
	TurnOutputs     int
	TurnOutputBytes int
	// MaxRounds bounds the model calls of one turn (BALLET_PLANNER_MAX_ROUNDS). Default
	// DefaultMaxRounds.
	MaxRounds int
	// ContextBudget is the size, in tokens estimated as bytes/4, that the context of a model
	// call may reach before older messages are summarized. Default DefaultContextBudget.
	ContextBudget int
	// MaxTokens bounds one model answer. Default provider.DefaultMaxTokens.
	MaxTokens int
	// SystemPrompt replaces the planner's instructions (the project and the human are
	// appended to it). Default DefaultSystemPrompt.
	SystemPrompt string
	// WatchQueue is how many outputs a watch queues before it ends with OutputLagging; the
	// queue holds the outputs waiting, not WatchQueue slots. Default DefaultWatchQueue.
	WatchQueue int
	// ToolTimeout bounds one tool call. Default DefaultToolTimeout.
	ToolTimeout time.Duration
	// ReplicaID names this replica in lease rows. Default a random id.
	ReplicaID string
	// Logger receives failures that callers do not see. Default slog.Default().
	Logger *slog.Logger
	// Observer is told how turns and model calls went, for metrics. Default none.
	Observer Observer
	// TracerProvider makes the spans of turns, model calls and tool calls. Default
	// otel.GetTracerProvider(), the host's, which records nothing until the host installs an
	// OpenTelemetry SDK.
	TracerProvider trace.TracerProvider

	// MaxMessageBytes bounds the text of a human message (BALLET_MAX_PLANNER_MESSAGE_BYTES).
	// Default DefaultMaxMessageBytes.
	MaxMessageBytes int
	// TurnsPerSubject bounds the turns running at once for one person, the one who sent
	// their message, on all replicas sharing the Store (BALLET_PLANNER_TURNS_PER_SUBJECT).
	// Default DefaultTurnsPerSubject.
	TurnsPerSubject int
	// SessionRate bounds the sessions one person creates in any minute, on this replica
	// (BALLET_PLANNER_SESSION_RATE). Default DefaultSessionRate.
	SessionRate int

	// OutputWindow is how long the outputs of the turns running here are gathered before
	// they are stored in one write and sent to every replica in as few notifications as they
	// fit in (BALLET_PLANNER_OUTPUT_WINDOW): an output waits at most that long more. Zero
	// means DefaultOutputWindow; negative, no batching: each output is stored and sent alone
	// as it is made.
	OutputWindow time.Duration
	// OutputBatch and OutputBatchBytes bound the outputs gathered in one window, in count and
	// bytes (BALLET_PLANNER_OUTPUT_BATCH, BALLET_PLANNER_OUTPUT_BATCH_BYTES): a full window is
	// written at once, and a turn with an output to add waits for room meanwhile, which slows
	// its reading of the model's stream. Defaults DefaultOutputBatch and
	// DefaultOutputBatchBytes.
	OutputBatch      int
	OutputBatchBytes int
}

// Limits are what one person may send the planner and make it run, as the Service enforces
// them (Options.MaxMessageBytes, TurnsPerSubject).
type Limits struct {
	MessageBytes    int // the longest text of a human message, in bytes
	TurnsPerSubject int // turns of one person running at once, on all replicas
}

// Causes of a turn's end other than its own completion.
var (
	errCancelled = errors.New("planner: turn cancelled")
	errShutdown  = errors.New("planner: shutting down")
	errLeaseLost = errors.New("planner: lease lost")
	errKilled    = errors.New("planner: replica abandoned")
	// errNotStored ends a turn silently, as errLeaseLost does, when a window of its outputs
	// could not be stored.
	errNotStored = fmt.Errorf("%w: its outputs could not be stored", errLeaseLost)
)

// Service runs planner sessions: their transcripts, one turn at a time per session across
// all replicas sharing the Store and Bus, the tools acting on the tracker, and live output.
type Service struct {
	store       Store
	trk         *tracker.Service
	prov        provider.Provider
	bus         Bus
	logger      *slog.Logger
	obs         Observer
	tracer      trace.Tracer
	lease       time.Duration
	maxRounds   int
	budget      int
	maxTokens   int
	system      string
	watchQueue  int
	toolTimeout time.Duration
	replica     string
	window      time.Duration
	keepOutputs int
	keepBytes   int
	maxText     int
	turnsPer    int
	sessionRate *windowLimit
	tools       []provider.Tool // with the tracker's limits
	out         *outbox

	unsubscribe func()
	keeperStop  context.CancelFunc
	keeperDone  chan struct{}
	turnsWG     sync.WaitGroup // running turns, and Sends between their checks and the turn
	watchWG     sync.WaitGroup // watch goroutines

	mu        sync.Mutex
	closed    bool
	killed    bool
	turns     map[string]*turn        // by session: turns started here
	gates     map[string]*subjectGate // by subject: made by the first send (turnlimit.go)
	watches   map[string]map[*watch]struct{}
	syncs     map[string]chan struct{}
	closeOnce sync.Once
}

// turn is a turn started on this replica.
type turn struct {
	session   *Session
	id        string // the turn's id, in every Output's Turn
	human     string // subject of the human who sent the message
	owner     string // lease owner: replica and turn, "<replica>/<id>"
	ctx       context.Context
	cancel    context.CancelCauseFunc
	started   time.Time
	parent    trace.SpanContext // of the send that started the turn; invalid when untraced
	renewedAt time.Time         // last successful lease renewal; keeper only
	leased    bool              // the lease was taken; under Service.mu
	gaveBack  bool              // the lease was released, as the turn ends; under Service.mu

	// Publishing: one output at a time, numbered in the order it goes out.
	pubMu       sync.Mutex
	offset      int64 // the last output's
	keptOutputs int   // outputs stored for resuming
	keptBytes   int
	cut         bool // past its bounds: the cut is stored, and after it only error and done

	// The turn's span and what it reports at the end; on the turn's goroutine only.
	span    trace.Span
	rounds  int            // model calls that answered
	usage   provider.Usage // tokens of all its model calls
	errType string         // error.type of the error that ended it, if any
}

// WithDefaults returns the options with every zero field set to its default, as New applies
// them; nil means all defaults. Each call makes a new Bus and ReplicaID when they are unset.
func (opts *Options) WithDefaults() Options {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Provider == nil {
		o.Provider = provider.NewScripted(nil)
	}
	if o.Bus == nil {
		o.Bus = NewMemoryBus()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.SystemPrompt == "" {
		o.SystemPrompt = DefaultSystemPrompt
	}
	if o.ReplicaID == "" {
		o.ReplicaID = randomID()
	}
	orDefault(&o.Lease, DefaultLease)
	orDefault(&o.ResumeWindow, DefaultResumeWindow)
	orDefault(&o.ToolTimeout, DefaultToolTimeout)
	orDefault(&o.MaxRounds, DefaultMaxRounds)
	orDefault(&o.ContextBudget, DefaultContextBudget)
	orDefault(&o.WatchQueue, DefaultWatchQueue)
	orDefault(&o.TurnOutputs, DefaultTurnOutputs)
	orDefault(&o.TurnOutputBytes, DefaultTurnOutputBytes)
	orDefault(&o.MaxMessageBytes, DefaultMaxMessageBytes)
	orDefault(&o.TurnsPerSubject, DefaultTurnsPerSubject)
	orDefault(&o.SessionRate, DefaultSessionRate)
	orDefault(&o.OutputBatch, DefaultOutputBatch)
	orDefault(&o.OutputBatchBytes, DefaultOutputBatchBytes)
	if o.OutputWindow == 0 {
		o.OutputWindow = DefaultOutputWindow
	}
	return o
}

// orDefault sets *v to def when it is zero or less.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// New returns a Service over store whose tools act through trk. It subscribes to the bus and
// starts the lease keeper; Close stops them.
func New(store Store, trk *tracker.Service, opts *Options) *Service {
	o := opts.WithDefaults()
	s := &Service{
		store: store, trk: trk, prov: o.Provider, bus: o.Bus, logger: o.Logger, obs: o.Observer,
		lease: o.Lease, maxRounds: o.MaxRounds, budget: o.ContextBudget, maxTokens: o.MaxTokens,
		system: o.SystemPrompt, watchQueue: o.WatchQueue, toolTimeout: o.ToolTimeout, replica: o.ReplicaID,
		window: o.ResumeWindow, keepOutputs: o.TurnOutputs, keepBytes: o.TurnOutputBytes,
		maxText: o.MaxMessageBytes, turnsPer: o.TurnsPerSubject, tools: toolDefs(trk.Limits()),
		turns: map[string]*turn{}, watches: map[string]map[*watch]struct{}{}, syncs: map[string]chan struct{}{},
		sessionRate: newWindowLimit(o.SessionRate, time.Minute), keeperDone: make(chan struct{}),
		tracer: o.TracerProvider.Tracer(tracerName, trace.WithSchemaURL(semconv.SchemaURL)),
	}
	s.out = newOutbox(s, o.OutputWindow, o.OutputBatch, o.OutputBatchBytes)
	s.unsubscribe = s.bus.Subscribe(s.wants, s.deliver)
	ctx, cancel := context.WithCancel(context.Background())
	s.keeperStop = cancel
	go s.keep(ctx)
	return s
}

// Limits returns the limits of one person the Service enforces.
func (s *Service) Limits() Limits {
	return Limits{MessageBytes: s.maxText, TurnsPerSubject: s.turnsPer}
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// forget removes t from the running turns, if it is still there.
func (s *Service) forget(t *turn) {
	s.mu.Lock()
	if s.turns[t.session.ID] == t {
		delete(s.turns, t.session.ID)
	}
	s.mu.Unlock()
}

// Cancel stops the session's running turn, wherever it runs; without one it does nothing.
// It needs tracker.write on the session's project. The turn ends with done "cancelled".
func (s *Service) Cancel(ctx context.Context, c Caller, session string) error {
	sess, err := s.session(ctx, c, session, auth.PermWrite)
	if err != nil {
		return err
	}
	s.mu.Lock()
	t := s.turns[session]
	local := t != nil && t.leased
	s.mu.Unlock()
	if t != nil {
		t.cancel(errCancelled)
	}
	if local || !sess.Running {
		return nil
	}
	// Marked on the lease too, which the running replica reads as it renews it: the
	// notification is faster, the mark survives a listener that was reconnecting.
	if err := s.store.RequestCancel(ctx, session); err != nil {
		return fmt.Errorf("planner: cancel session %s: %w", session, err)
	}
	if err := s.bus.Publish(ctx, Note{Session: session, Cancel: true}); err != nil {
		return fmt.Errorf("planner: cancel session %s: %w", session, err)
	}
	return nil
}

// Close stops the turns running here (their watchers get error and done), delivers what is
// still on its way to local watchers, ends the watches and the background work, and waits
// for all of it. It is safe to call twice.
func (s *Service) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		killed := s.killed
		for _, t := range s.turns {
			t.cancel(errShutdown)
		}
		s.mu.Unlock()
		s.turnsWG.Wait()
		s.out.close()
		if !killed {
			s.sync(5 * time.Second)
		}
		s.leave()
		s.watchWG.Wait()
	})
	return nil
}

// leave stops renewing leases, leaves the bus and ends every watch silently: the last of
// Close, and of abandon.
func (s *Service) leave() {
	s.keeperStop()
	<-s.keeperDone
	s.unsubscribe()
	s.mu.Lock()
	for _, set := range s.watches {
		for w := range set {
			s.dropLocked(w, false)
		}
	}
	s.mu.Unlock()
}

// abandon stops the Service as if its process died: running turns stop without storing,
// publishing or releasing anything, leases are no longer renewed, watches end silently and
// the bus is left. Close still waits for the goroutines afterwards.
func (s *Service) abandon() {
	s.mu.Lock()
	s.killed = true
	for _, t := range s.turns {
		t.cancel(errKilled)
	}
	s.mu.Unlock()
	s.out.kill()
	s.leave()
}

// sync publishes a marker and waits until it comes back, so that the notes published before
// it reached this replica's watchers.
func (s *Service) sync(limit time.Duration) {
	id := randomID()
	ch := make(chan struct{})
	s.mu.Lock()
	s.syncs[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.syncs, id)
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := s.bus.Publish(ctx, Note{Sync: id}); err != nil {
		s.logger.Warn("planner: flush output on close", "err", err)
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
		s.logger.Warn("planner: output still in flight on close")
	}
}

// wants reports whether a session's note matters here: the session has watches, or, for a
// note other than an output (a cancel stops the turn), a turn running here. The bus skips
// the others unread: the replica running a turn does not decode its outputs coming back.
func (s *Service) wants(session string, output bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches[session] != nil || (!output && s.turns[session] != nil)
}

// deliver handles a note from the bus. It never blocks.
func (s *Service) deliver(n Note) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case n.Lost:
		for _, set := range s.watches {
			for w := range set {
				s.dropLocked(w, true)
			}
		}
	case n.Sync != "":
		if ch := s.syncs[n.Sync]; ch != nil {
			close(ch)
			delete(s.syncs, n.Sync)
		}
	case n.Cancel:
		if t := s.turns[n.Session]; t != nil {
			t.cancel(errCancelled)
		}
	case n.Output != nil:
		for w := range s.watches[n.Session] {
			if !w.queue.put(*n.Output, s.watchQueue) {
				s.dropLocked(w, true)
			}
		}
	}
}
