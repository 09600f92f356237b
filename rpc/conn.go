package rpc

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sync"

	"github.com/ballet/gateway/codec"
)

// Options configure a Conn. A nil *Options means all defaults.
type Options struct {
	// Handler serves incoming messages. Default: every method is not found.
	Handler Handler
	// MaxConcurrent bounds requests handled at once; the reader waits when
	// it is reached. Default 16.
	MaxConcurrent int
	// OutQueue bounds frames queued by Call, Notify and responses; senders
	// wait when it is full. Default 256.
	OutQueue int
	// MaxTrySend bounds frames queued by TrySend; beyond it TrySend fails.
	// Default 65536.
	MaxTrySend int
	// MaxQueuedBytes bounds the bytes of the frames queued and not yet written: every frame
	// (responses, notifications, TrySend's), its encoded bytes and FrameOverhead. A frame that
	// would take the queue past it is refused (TrySend reports false, a response or Notify is
	// dropped) and Hooks.OnOverflow is called, once; a frame is always taken into an empty queue,
	// whatever its size. 0: no bound.
	MaxQueuedBytes int64
	// Total, when set, is told the bytes this connection has queued, as a server's
	// connections share one to know what they hold together (see Total).
	Total *Total
	// Hooks see what the connection reads and how it ends. Default NoHooks.
	Hooks Hooks
	// Logger receives internal errors. Default slog.Default().
	Logger *slog.Logger
	// Workers run the connection's writer and resumed reader. Default a
	// pool shared by every connection made without one, which lives as
	// long as the program; a server passes its own and closes it.
	Workers *Workers
}

// Hooks let a connection's owner see and steer what it reads and learn how it ends: one value
// for all of them, so that a server's connection holds one reference to its owner rather than a
// closure each. Embed NoHooks to implement only some.
type Hooks interface {
	// Inline reports whether a request method is handled on the reader goroutine, so that later
	// messages are processed only after it (auth).
	Inline(method string) bool
	// OnMessage is called for every frame received, before decoding.
	OnMessage()
	// Admit is called on the reader for every frame after OnMessage and before decoding. It may
	// block: the reader then reads no further, and the transport's flow control holds the peer
	// back. nil serves the frame; ErrSkip drops it undecoded; any other error answers a request
	// in the frame instead of serving it (a notification is then dropped; a response is still
	// delivered).
	Admit(ctx context.Context) error
	// Screen sees each admitted frame as decoded, on the reader (err is set when it does not
	// decode), and reports whether it is processed; false drops it, unanswered.
	Screen(m *codec.Message, err *codec.DecodeError) bool
	// OnDone is called once as the connection ends, with the reason (see Err), on a goroutine
	// of its own.
	OnDone(err error)
	// OnOverflow is called once, on a goroutine of its own, when MaxQueuedBytes refuses a
	// frame: the peer does not keep up, and the owner closes the connection.
	OnOverflow()
}

// NoHooks is Hooks that change nothing: no method is inline, every frame is admitted and
// processed, and the ends go unobserved.
type NoHooks struct{}

func (NoHooks) Inline(string) bool                             { return false }
func (NoHooks) OnMessage()                                     {}
func (NoHooks) Admit(context.Context) error                    { return nil }
func (NoHooks) Screen(*codec.Message, *codec.DecodeError) bool { return true }
func (NoHooks) OnDone(error)                                   {}
func (NoHooks) OnOverflow()                                    {}

// Conn is one JSON-RPC connection.
type Conn struct {
	// Set by NewConn and read-only after, but for the counters marked (mu).
	t       Transport
	tw      TryWriter // nil: every frame goes through the writer
	codec   codec.Codec
	handler Handler
	hooks   Hooks
	log     *slog.Logger
	workers *Workers

	// The context exists from NewConn on, so that every method is safe
	// before and during Start; see end.
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // the connection's goroutines and a held writer role

	maxConc  int32
	active   int32         // requests being handled (mu)
	outQueue int           // OutQueue tokens
	used     int           // tokens taken (mu)
	freed    chan struct{} // closed when a token is returned, if anyone waits (mu)
	maxTry   int
	maxBytes int64
	total    *Total

	// mu guards the fields below.
	mu      sync.Mutex
	started bool        // Start has been called
	writer  writerState // the writer role's state (write.go): changed only by setWriterLocked
	closed  bool        // no frame is taken any more
	shed    bool        // Shed was called: frames with bytes are refused
	over    bool        // MaxQueuedBytes refused a frame: OnOverflow has been called
	ending  bool        // end has run ended
	queue   []outFrame
	spare   []outFrame // the writer's previous batch, reused
	ready   []Source   // sources with frames to pull (Ready), in turn
	tryLen  int
	bytes   int64     // queued and not yet written: frameBytes of each
	told    int64     // what total was last told of bytes
	rare    *connRare // made on first use
}

// connRare is the state of a Conn that few connections use, made on first use (under the
// Conn's mu): a server's idle connection, which makes no calls, is watched by no context and
// has never waited for a request slot, holds only the pointer.
type connRare struct {
	nextID    int64                         // the last request id Call took
	pending   map[int64]chan *codec.Message // Call's requests awaiting their response
	unwatch   func() bool                   // stops watching Start's ctx
	slotFreed chan struct{}                 // closed when a request ends, if the reader waits
}

// rareLocked returns c.rare, made if need be; c.mu is held.
func (c *Conn) rareLocked() *connRare {
	if c.rare == nil {
		c.rare = new(connRare)
	}
	return c.rare
}

// NewConn returns a connection over t speaking c. Call Start to run it.
func NewConn(t Transport, c codec.Codec, opts *Options) *Conn {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 16
	}
	if o.OutQueue <= 0 {
		o.OutQueue = 256
	}
	if o.MaxTrySend <= 0 {
		o.MaxTrySend = 65536
	}
	if o.Handler == nil {
		o.Handler = HandlerFunc(func(_ context.Context, r *Request) (any, error) {
			return nil, Errorf(ErrMethodNotFound, "method %s not found", r.Method)
		})
	}
	if o.Hooks == nil {
		o.Hooks = NoHooks{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Workers == nil {
		o.Workers = defaultWorkers
	}
	tw, _ := t.(TryWriter)
	cn := &Conn{
		t: t, tw: tw, codec: c, handler: o.Handler, hooks: o.Hooks, log: o.Logger, workers: o.Workers,
		maxConc:  int32(min(o.MaxConcurrent, math.MaxInt32)),
		outQueue: o.OutQueue,
		maxTry:   o.MaxTrySend,
		maxBytes: o.MaxQueuedBytes, total: o.Total,
	}
	cn.ctx, cn.cancel = context.WithCancelCause(context.Background())
	return cn
}

// Codec returns the connection's codec.
func (c *Conn) Codec() codec.Codec { return c.codec }

// Start runs the connection until ctx ends (its cause becomes Err), the
// transport fails, or Close is called; handlers' contexts carry no values of
// ctx. One goroutine reads (none while a Parker transport is parked); a
// writer goroutine runs only while frames are queued, so an idle connection
// costs at most one goroutine. A connection that has ended already, by Close
// or Abort, does not start.
func (c *Conn) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	again := c.started
	c.started = true
	if again || c.closed || c.ctx.Err() != nil {
		return
	}
	if ctx.Done() != nil {
		c.rareLocked().unwatch = context.AfterFunc(ctx, func() { c.end(context.Cause(ctx)) })
	}
	c.wg.Add(1) // before Close can wait: it sets closed under mu first
	go c.readLoop(false)
}

// end cancels the connection's context with err as its cause and, the first time, runs ended.
func (c *Conn) end(err error) {
	c.cancel(err)
	c.mu.Lock()
	first := !c.ending
	c.ending = true
	c.mu.Unlock()
	if first {
		go c.ended()
	}
}

// ended runs once when the connection's context is done.
func (c *Conn) ended() {
	c.failPending()
	if cl, ok := c.t.(io.Closer); ok {
		_ = cl.Close()
	}
	c.hooks.OnDone(context.Cause(c.ctx))
}

// Context is cancelled when the connection ends.
func (c *Conn) Context() context.Context { return c.ctx }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.ctx.Done() }

// Err returns why the connection ended, or nil while it runs.
func (c *Conn) Err() error {
	if c.ctx.Err() == nil {
		return nil
	}
	return context.Cause(c.ctx)
}

// Close ends the connection and waits for its goroutines, including running
// handlers, to return. It is safe to call more than once, and before Start.
func (c *Conn) Close() error {
	c.end(ErrClosed)
	c.failPending() // neither Start nor a writer starts a goroutine after this
	c.wg.Wait()
	return nil
}

// Abort ends the connection with err as its reason, without waiting.
func (c *Conn) Abort(err error) { c.end(err) }

// Wait blocks until every goroutine of the connection has returned.
func (c *Conn) Wait() { c.wg.Wait() }

func (c *Conn) fail(err error) { c.end(err) }

func (c *Conn) failPending() {
	c.mu.Lock()
	c.closed = true
	if c.writer == writerIdle {
		c.ready = nil
	}
	var pending map[int64]chan *codec.Message
	var unwatch func() bool
	if r := c.rare; r != nil {
		pending, unwatch = r.pending, r.unwatch
		r.pending, r.unwatch = nil, nil
	}
	c.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	for _, ch := range pending {
		close(ch)
	}
}
