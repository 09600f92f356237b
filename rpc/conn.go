package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/ballet/gateway/codec"
)

// Transport carries whole messages (WebSocket frames, or an in-memory pipe).
// Read must return when ctx is cancelled, or, for a transport that is also
// an io.Closer, when the Conn closes it as it ends. Write is called from one
// goroutine.
type Transport interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, frame []byte) error
}

// Request is an incoming request or notification.
type Request struct {
	Conn   *Conn
	Method string
	// ID is the request id; Notification is true when there is none.
	ID           int64
	Notification bool
	Params       []byte // raw in the connection's codec; nil when absent

	after func()
}

// AfterReply arranges for f to run once the response to this request has
// been queued (for notifications, after the handler returns), e.g. to close
// the connection right after an error reply.
func (r *Request) AfterReply(f func()) { r.after = f }

// Handler serves incoming requests and notifications. For a notification the
// result is discarded, and so is ErrMethodNotFound (unknown notifications are
// ignored, as JSON-RPC says).
type Handler interface {
	Handle(ctx context.Context, req *Request) (result any, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

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
	// Inline reports whether a request method is handled on the reader
	// goroutine, so that later messages are processed only after it (auth).
	Inline func(method string) bool
	// OnMessage is called for every frame received, before decoding.
	OnMessage func()
	// Admit, when set, is called on the reader for every frame after
	// OnMessage and before decoding. It may block: the reader then reads
	// no further, and the transport's flow control holds the peer back.
	// nil serves the frame; ErrSkip drops it undecoded; any other error
	// answers a request in the frame instead of serving it (a
	// notification is then dropped; a response is still delivered).
	Admit func(ctx context.Context) error
	// Screen, when set, sees each admitted frame as decoded, on the reader
	// (err is set when it does not decode), and reports whether it is
	// processed; false drops it, unanswered.
	Screen func(m *codec.Message, err *codec.DecodeError) bool
	// OnDone, when set, is called once as the connection ends, with the
	// reason (see Err), on a goroutine of its own.
	OnDone func(err error)
	// Logger receives internal errors. Default slog.Default().
	Logger *slog.Logger
}

// Conn is one JSON-RPC connection.
type Conn struct {
	t       Transport
	tw      TryWriter // nil: every frame goes through the writer
	codec   codec.Codec
	handler Handler
	inline  func(string) bool
	onMsg   func()
	admit   func(context.Context) error
	screen  func(*codec.Message, *codec.DecodeError) bool
	onDone  func(error)
	log     *slog.Logger

	// The context exists from NewConn on, so that every method is safe
	// before and during Start; cancel also runs ended, once.
	ctx     context.Context
	cancel  context.CancelCauseFunc
	endOnce sync.Once
	wg      sync.WaitGroup

	maxConc   int
	active    int           // requests being handled (mu)
	slotFreed chan struct{} // closed when one ends, if the reader waits (mu)
	outQueue  int           // OutQueue tokens
	used      int           // tokens taken (mu)
	freed     chan struct{} // closed when a token is returned, if anyone waits (mu)
	maxTry    int
	nextID    atomic.Int64

	mu      sync.Mutex
	started bool        // Start has been called
	unwatch func() bool // stops watching Start's ctx
	queue   []outFrame
	spare   []outFrame // the writer's previous batch, reused
	tryLen  int
	writing bool                          // a writer goroutine is running
	pending map[int64]chan *codec.Message // made by the first Call
	closed  bool
}

// outFrame is one queued frame: encoded data, or a notification spliced
// from a shared body by the writer (so fan-out allocates nothing per
// subscriber), or a Flush marker.
type outFrame struct {
	data   []byte
	method string // with body: splice method/sub/body when writing
	sub    string
	body   []byte
	done   func()
	token  bool          // holds an OutQueue token
	try    bool          // counted in tryLen
	marker chan struct{} // Flush marker
}

// Parker is implemented by transports that can wait for the next message
// without a goroutine of their own (an event poller): between messages the
// reader asks Park to call resume once a read would not block, or once the
// transport is closed, and its goroutine returns. Park reports false when it
// cannot park now (bytes are already buffered, or the transport cannot be
// polled); the reader then reads as usual. An idle connection that parks
// costs no goroutine and no stack.
type Parker interface {
	Park(resume func()) bool
}

var scratchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Batcher is implemented by transports that can gather several frames into
// one write: the writer calls Cork before a batch and Uncork after it.
type Batcher interface {
	Cork()
	Uncork() error
}

// TryWriter is implemented by transports that can take a frame without the
// caller waiting: TryWrite writes frame when the transport is not still
// sending earlier bytes to a slow peer, and reports false (having written
// nothing) when it is. Several frames go out together. A frame with no writer running then goes out on the
// sender's goroutine, without a hand-off to a writer (a fan-out to many
// connections makes no goroutine switch per connection).
type TryWriter interface {
	TryWrite(frames [][]byte) (bool, error)
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
	if o.Inline == nil {
		o.Inline = func(string) bool { return false }
	}
	if o.OnMessage == nil {
		o.OnMessage = func() {}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	tw, _ := t.(TryWriter)
	cn := &Conn{
		t: t, tw: tw, codec: c, handler: o.Handler, inline: o.Inline, onMsg: o.OnMessage, admit: o.Admit, screen: o.Screen,
		onDone: o.OnDone, log: o.Logger,
		maxConc:  o.MaxConcurrent,
		outQueue: o.OutQueue,
		maxTry:   o.MaxTrySend,
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cn.ctx = ctx
	cn.cancel = func(err error) {
		cancel(err)
		cn.endOnce.Do(func() { go cn.ended() })
	}
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
		c.unwatch = context.AfterFunc(ctx, func() { c.cancel(context.Cause(ctx)) })
	}
	c.wg.Add(1) // before Close can wait: it sets closed under mu first
	go c.readLoop(false)
}

// ended runs once when the connection's context is done.
func (c *Conn) ended() {
	c.failPending()
	if cl, ok := c.t.(io.Closer); ok {
		_ = cl.Close()
	}
	if c.onDone != nil {
		c.onDone(context.Cause(c.ctx))
	}
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
	c.cancel(ErrClosed)
	c.failPending() // neither Start nor a writer starts a goroutine after this
	c.wg.Wait()
	return nil
}

// Abort ends the connection with err as its reason, without waiting.
func (c *Conn) Abort(err error) { c.cancel(err) }

// Wait blocks until every goroutine of the connection has returned.
func (c *Conn) Wait() { c.wg.Wait() }

func (c *Conn) fail(err error) { c.cancel(err) }

func (c *Conn) failPending() {
	c.mu.Lock()
	c.closed = true
	pending, unwatch := c.pending, c.unwatch
	c.pending, c.unwatch = nil, nil
	c.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	for _, ch := range pending {
		close(ch)
	}
}

// readLoop is the connection's reader. It owns one count of c.wg from Start
// until the transport fails, also while parked: resume runs it again, with
// resumed set so that it reads before it parks again.
func (c *Conn) readLoop(resumed bool) {
	parked := false
	defer func() {
		if !parked {
			c.wg.Done()
		}
	}()
	parker, _ := c.t.(Parker)
	for {
		if parker != nil && !resumed && c.ctx.Err() == nil && parker.Park(c.resume) {
			parked = true
			return
		}
		resumed = false
		data, err := c.t.Read(c.ctx)
		if err != nil {
			c.fail(fmt.Errorf("rpc: read: %w", err))
			return
		}
		c.onMsg()
		var refused error
		if c.admit != nil {
			if refused = c.admit(c.ctx); errors.Is(refused, ErrSkip) {
				continue
			}
		}
		var m codec.Message
		var de *codec.DecodeError
		if err := c.codec.Decode(data, &m); err != nil && !errors.As(err, &de) {
			de = &codec.DecodeError{Code: codec.CodeParseError, Msg: "parse error"}
		}
		if c.screen != nil && !c.screen(&m, de) {
			continue
		}
		if de != nil {
			c.respond(&codec.Message{ID: de.ID, HasID: de.HasID}, &Error{Code: de.Code, Message: de.Msg}, nil)
			continue
		}
		switch {
		case m.IsResponse():
			c.deliver(&m)
		case refused != nil:
			if m.IsRequest() {
				c.respond(&codec.Message{ID: m.ID, HasID: true}, refused, nil)
			}
		case m.IsNotification():
			// Handled on the reader, so strictly in order.
			c.serve(&Request{Conn: c, Method: m.Method, Notification: true, Params: m.Params})
		default:
			req := &Request{Conn: c, Method: m.Method, ID: m.ID, Params: m.Params}
			if c.inline(m.Method) {
				// Served before reading on, but on its own goroutine, so
				// that the reader's stack stays small for the idle life
				// of the connection.
				done := make(chan struct{})
				c.wg.Add(1)
				go func() {
					defer c.wg.Done()
					defer close(done)
					c.serve(req)
				}()
				<-done
				continue
			}
			if !c.takeSlot() {
				return
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				defer c.giveSlot()
				c.serve(req)
			}()
		}
	}
}

// takeSlot waits until fewer than MaxConcurrent requests are being
// handled and counts one more; false when the connection ended first.
func (c *Conn) takeSlot() bool {
	for {
		c.mu.Lock()
		if c.active < c.maxConc {
			c.active++
			c.mu.Unlock()
			return true
		}
		if c.slotFreed == nil {
			c.slotFreed = make(chan struct{})
		}
		freed := c.slotFreed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-c.ctx.Done():
			return false
		}
	}
}

func (c *Conn) giveSlot() {
	c.mu.Lock()
	c.active--
	if c.slotFreed != nil {
		close(c.slotFreed)
		c.slotFreed = nil
	}
	c.mu.Unlock()
}

// resume continues a parked reader on a new goroutine.
func (c *Conn) resume() { workers.run(c.resumeRead) }

func (c *Conn) resumeRead() { c.readLoop(true) }

// serve runs the handler for one request or notification and answers it.
func (c *Conn) serve(req *Request) {
	result, err := c.call(req)
	if req.after != nil {
		defer req.after()
	}
	if req.Notification {
		if err != nil && !errors.Is(err, ErrMethodNotFound) && c.ctx.Err() == nil {
			c.log.Debug("notification failed", "method", req.Method, "err", err)
		}
		return
	}
	c.respond(&codec.Message{ID: req.ID, HasID: true}, err, result)
}

func (c *Conn) call(req *Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("rpc handler panicked", "method", req.Method, "panic", p, "stack", string(debug.Stack()))
			result, err = nil, ErrInternal
		}
	}()
	return c.handler.Handle(c.ctx, req)
}

// respond sends the response for a request: err, or result. Every request
// is answered: a result that cannot be encoded is -32603, an error whose
// data cannot be goes without it, and a response the codec cannot encode
// becomes a bare -32603 (or, failing that too, ends the connection).
func (c *Conn) respond(m *codec.Message, err error, result any) {
	if err != nil {
		we, internal := wireError(err)
		if internal {
			c.log.Error("rpc request failed", "method", m.Method, "id", m.ID, "err", err)
		}
		m.Error = &codec.Error{Code: we.Code, Message: we.Message}
		if we.Data != nil {
			if data, derr := c.codec.Marshal(we.Data); derr != nil {
				c.log.Error("rpc error data encoding failed", "id", m.ID, "code", we.Code, "err", derr)
			} else {
				m.Error.Data = data
			}
		}
	} else if raw, merr := c.marshal(result); merr != nil {
		c.log.Error("rpc result encoding failed", "id", m.ID, "err", merr)
		m.Error = &codec.Error{Code: ErrInternal.Code, Message: ErrInternal.Message}
	} else {
		m.Result = raw
	}
	frame, eerr := c.codec.Encode(nil, m)
	if eerr != nil {
		c.log.Error("rpc response encoding failed", "id", m.ID, "err", eerr)
		bare := &codec.Message{ID: m.ID, HasID: m.HasID, Error: &codec.Error{Code: ErrInternal.Code, Message: ErrInternal.Message}}
		if frame, eerr = c.codec.Encode(nil, bare); eerr != nil {
			c.fail(fmt.Errorf("rpc: encode response: %w", eerr)) // the peer would wait for ever
			return
		}
	}
	_ = c.send(c.ctx, frame)
}

func (c *Conn) marshal(v any) ([]byte, error) {
	if v == nil {
		return c.codec.Marshal(struct{}{})
	}
	return c.codec.Marshal(v)
}

func (c *Conn) deliver(m *codec.Message) {
	if !m.HasID {
		c.log.Debug("rpc error response with null id", "error", m.Error)
		return
	}
	c.mu.Lock()
	ch, ok := c.pending[m.ID]
	delete(c.pending, m.ID)
	c.mu.Unlock()
	if ok {
		ch <- m
	}
}

// Call sends a request and waits for its response, decoding the result into
// result (when non-nil). An error response is returned as *Error.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	raw, err := c.marshal(params)
	if err != nil {
		return fmt.Errorf("rpc: encode params of %s: %w", method, err)
	}
	id := c.nextID.Add(1)
	ch := make(chan *codec.Message, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.pending == nil {
		c.pending = make(map[int64]chan *codec.Message)
	}
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	frame, err := c.codec.Encode(nil, &codec.Message{ID: id, HasID: true, Method: method, Params: raw})
	if err != nil {
		forget()
		return err
	}
	if err := c.send(ctx, frame); err != nil {
		forget()
		return err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return ErrClosed
		}
		if m.Error != nil {
			e := &Error{Code: m.Error.Code, Message: m.Error.Message}
			if m.Error.Data != nil {
				var data any
				if c.codec.Unmarshal(m.Error.Data, &data) == nil {
					e.Data = data
				}
			}
			return e
		}
		if result != nil && m.Result != nil {
			if err := c.codec.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("rpc: decode result of %s: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		forget()
		return ctx.Err()
	}
}

// Notify sends a notification, waiting for queue space if needed.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	raw, err := c.marshal(params)
	if err != nil {
		return fmt.Errorf("rpc: encode params of %s: %w", method, err)
	}
	frame, err := c.codec.Encode(nil, &codec.Message{Method: method, Params: raw})
	if err != nil {
		return err
	}
	return c.send(ctx, frame)
}

// send queues a frame, waiting for space in the bounded out queue.
func (c *Conn) send(ctx context.Context, frame []byte) error {
	if err := c.takeSpace(ctx); err != nil {
		return err
	}
	if !c.enqueue1(outFrame{data: frame, token: true}, false) {
		c.giveSpace()
		return ErrClosed
	}
	return nil
}

// takeSpace takes one of the OutQueue tokens, waiting while none is free.
func (c *Conn) takeSpace(ctx context.Context) error {
	for {
		c.mu.Lock()
		if c.used < c.outQueue {
			c.used++
			c.mu.Unlock()
			return nil
		}
		if c.freed == nil {
			c.freed = make(chan struct{})
		}
		freed := c.freed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ctx.Done():
			return ErrClosed
		}
	}
}

// giveSpace returns a token and wakes the senders waiting for one.
func (c *Conn) giveSpace() {
	c.mu.Lock()
	c.used--
	if c.freed != nil {
		close(c.freed)
		c.freed = nil
	}
	c.mu.Unlock()
}

// TrySend queues an already encoded frame without waiting. It returns false
// when the connection has ended or MaxTrySend frames are already queued by
// TrySend. done, when non-nil, is called once the frame was written or
// dropped because the connection ended.
func (c *Conn) TrySend(frame []byte, done func()) bool {
	return c.enqueue1(outFrame{data: frame, done: done, try: true}, true)
}

// TrySendSpliced queues the notification method whose params are body (an
// encoded object shared by many connections) with "subscription": sub added;
// the frame is built by the writer into a reused buffer. Like TrySend, it
// never waits.
func (c *Conn) TrySendSpliced(method, sub string, body []byte, done func()) bool {
	fs := outFrames.Get().(*[]outFrame)
	*fs = append((*fs)[:0], outFrame{method: method, sub: sub, body: body, done: done, try: true})
	ok := c.enqueue(*fs, true)
	putFrames(fs)
	return ok
}

// TrySendSplicedBatch is TrySendSpliced for several notifications of one
// subscription, all or none, and none when they are more than room (the
// sender's own queue bound): when no writer runs they go out at once, in
// one write if the transport allows. done is called once per frame.
func (c *Conn) TrySendSplicedBatch(method, sub string, bodies [][]byte, room int, done func()) bool {
	fs := outFrames.Get().(*[]outFrame)
	for _, b := range bodies {
		*fs = append(*fs, outFrame{method: method, sub: sub, body: b, done: done, try: true})
	}
	ok := c.enqueueRoom(*fs, true, room)
	putFrames(fs)
	return ok
}

var outFrames = sync.Pool{New: func() any { s := make([]outFrame, 0, 8); return &s }}

func putFrames(fs *[]outFrame) {
	if cap(*fs) <= 1024 {
		clear(*fs)
		*fs = (*fs)[:0]
		outFrames.Put(fs)
	}
}

func (c *Conn) enqueue1(f outFrame, try bool) bool {
	fs := [1]outFrame{f}
	return c.enqueue(fs[:], try)
}

// enqueue queues fs (copied) in order, or writes them at once (writeNow).
func (c *Conn) enqueue(fs []outFrame, try bool) bool { return c.enqueueRoom(fs, try, len(fs)) }

// enqueueRoom is enqueue that refuses more than room frames.
func (c *Conn) enqueueRoom(fs []outFrame, try bool, room int) bool {
	c.mu.Lock()
	now := !c.writing && c.tw != nil && fs[0].marker == nil
	if c.closed || (try && c.tryLen+len(fs) > c.maxTry) || len(fs) > room {
		c.mu.Unlock()
		return false
	}
	if try {
		c.tryLen += len(fs)
	}
	if now {
		// No writer runs and nothing is queued: write here.
		c.writing = true
		c.wg.Add(1)
		c.mu.Unlock()
		c.writeNow(fs)
		return true
	}
	c.queue = append(c.queue, fs...)
	if !c.writing {
		c.writing = true
		c.wg.Add(1)
		workers.run(c.writeLoop)
	}
	c.mu.Unlock()
	return true
}

// direct is writeNow's buffers: the spliced frames one after another, and
// the frames to write.
type direct struct {
	data   []byte
	ends   []int // per frame: end of its splice in data, -1 when none
	frames [][]byte
}

var directs = sync.Pool{New: func() any { return new(direct) }}

// writeNow writes fs on the caller's goroutine if the transport takes them
// without waiting, and otherwise hands them to a writer. The caller holds
// the writer's role (c.writing and a count of c.wg), which passes on to
// the writer when one is needed.
func (c *Conn) writeNow(fs []outFrame) {
	written := false
	var err error
	if c.ctx.Err() == nil {
		d := directs.Get().(*direct)
		for i := range fs {
			f := &fs[i]
			end := -1
			if f.body != nil {
				var serr error
				n := len(d.data)
				if d.data, serr = c.codec.Splice(d.data, f.method, f.sub, f.body); serr != nil {
					c.log.Error("rpc: splice failed", "method", f.method, "err", serr)
					d.data = d.data[:n] // dropped like the writer drops it
				} else {
					end = len(d.data)
				}
			}
			d.ends = append(d.ends, end)
		}
		start := 0
		for i := range fs {
			switch {
			case d.ends[i] >= 0:
				d.frames = append(d.frames, d.data[start:d.ends[i]])
				start = d.ends[i]
			case fs[i].body == nil && fs[i].data != nil:
				d.frames = append(d.frames, fs[i].data)
			}
		}
		if len(d.frames) == 0 {
			written = true
		} else {
			written, err = c.tw.TryWrite(d.frames)
		}
		clear(d.frames)
		d.frames, d.ends = d.frames[:0], d.ends[:0]
		if cap(d.data) <= 64<<10 && cap(d.frames) <= 1024 {
			d.data = d.data[:0]
			directs.Put(d)
		}
	}
	c.mu.Lock()
	if !written {
		// The writer writes them (or drops them, if the connection ended),
		// before anything queued after them.
		q := make([]outFrame, 0, len(fs)+len(c.queue))
		q = append(q, fs...)
		c.queue = append(q, c.queue...)
	}
	if len(c.queue) > 0 {
		c.mu.Unlock()
		if written {
			for i := range fs {
				c.finish(fs[i])
			}
		}
		if err != nil {
			c.fail(fmt.Errorf("rpc: write: %w", err))
		}
		workers.run(c.writeLoop)
		return
	}
	c.writing = false
	c.mu.Unlock()
	for i := range fs {
		c.finish(fs[i])
	}
	c.wg.Done()
	if err != nil {
		c.fail(fmt.Errorf("rpc: write: %w", err))
	}
}

// Flush waits until every frame queued before it has been written.
func (c *Conn) Flush(ctx context.Context) error {
	marker := make(chan struct{})
	if !c.enqueue1(outFrame{marker: marker}, false) {
		return ErrClosed
	}
	select {
	case <-marker:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// writeLoop writes queued frames until the queue is empty, then exits; the
// next enqueue starts it again. Each batch is corked into one write when the
// transport is a Batcher.
func (c *Conn) writeLoop() {
	defer c.wg.Done()
	batcher, _ := c.t.(Batcher)
	// A writer runs only while frames are queued: its splice buffer comes
	// from a pool rather than being made anew each time.
	sp := scratchBufs.Get().(*[]byte)
	scratch := (*sp)[:0]
	defer func() {
		if cap(scratch) <= 64<<10 {
			*sp = scratch[:0]
			scratchBufs.Put(sp)
		}
	}()
	for {
		c.mu.Lock()
		if len(c.queue) == 0 || c.ctx.Err() != nil {
			rest := c.queue
			// An idle connection keeps no queue: the next enqueue makes one.
			c.queue, c.spare = nil, nil
			if c.ctx.Err() != nil {
				c.closed = true
			}
			c.writing = false
			c.mu.Unlock()
			for _, f := range rest {
				c.finish(f)
			}
			return
		}
		batch := c.queue
		c.queue = c.spare[:0]
		c.mu.Unlock()

		err := c.writeBatch(batch, batcher, &scratch)
		for i := range batch {
			if err != nil {
				c.finish(batch[i]) // drops the unwritten rest
			}
			batch[i] = outFrame{}
		}
		c.mu.Lock()
		c.spare = batch[:0]
		c.mu.Unlock()
		if err != nil {
			c.fail(fmt.Errorf("rpc: write: %w", err))
		}
		if cap(scratch) > 64<<10 {
			scratch = (*sp)[:0] // do not keep a large frame's buffer
		}
	}
}

// writeBatch writes the frames of batch in order, finishing each written one.
// On error the written ones are already finished and zeroed.
func (c *Conn) writeBatch(batch []outFrame, batcher Batcher, scratch *[]byte) (err error) {
	if batcher != nil {
		// Also for one frame: its header and payload go out in one write.
		batcher.Cork()
		defer func() {
			if uerr := batcher.Uncork(); err == nil {
				err = uerr
			}
		}()
	}
	for i := range batch {
		f := &batch[i]
		data := f.data
		if f.body != nil {
			*scratch, err = c.codec.Splice((*scratch)[:0], f.method, f.sub, f.body)
			if err != nil {
				c.log.Error("rpc: splice failed", "method", f.method, "err", err)
				data = nil
			} else {
				data = *scratch
			}
		}
		if data != nil {
			if err := c.t.Write(c.ctx, data); err != nil {
				return err
			}
		}
		c.finish(*f)
		*f = outFrame{}
	}
	return nil
}

func (c *Conn) finish(f outFrame) {
	if f.token {
		c.giveSpace()
	}
	if f.try {
		c.mu.Lock()
		c.tryLen--
		c.mu.Unlock()
	}
	if f.done != nil {
		f.done()
	}
	if f.marker != nil {
		close(f.marker)
	}
}
