package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/ballet/gateway/codec"
)

// Transport carries whole messages (WebSocket frames, or an in-memory pipe).
// Read must return when ctx is cancelled. Write is called from one goroutine.
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

// Decode decodes the params into v. Absent params leave v unchanged; params
// that do not fit v are an ErrInvalidParams error.
func (r *Request) Decode(v any) error {
	if r.Params == nil {
		return nil
	}
	if err := r.Conn.codec.Unmarshal(r.Params, v); err != nil {
		return Errorf(ErrInvalidParams, "invalid params for %s: %v", r.Method, err)
	}
	return nil
}

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
	// NotificationQueue bounds notifications waiting to be handled in
	// order; the reader waits when it is full. Default 128.
	NotificationQueue int
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
	// Logger receives internal errors. Default slog.Default().
	Logger *slog.Logger
}

// Conn is one JSON-RPC connection.
type Conn struct {
	t       Transport
	codec   codec.Codec
	handler Handler
	inline  func(string) bool
	onMsg   func()
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	sem     chan struct{} // request concurrency
	notes   chan *Request // ordered notifications
	space   chan struct{} // OutQueue tokens
	maxTry  int
	nextID  atomic.Int64
	started atomic.Bool

	mu      sync.Mutex
	queue   []outFrame
	tryLen  int
	wake    chan struct{}
	pending map[int64]chan *codec.Message
	closed  bool
}

type outFrame struct {
	data   []byte
	done   func()
	token  bool          // holds an OutQueue token
	try    bool          // counted in tryLen
	marker chan struct{} // Flush marker when data is nil
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
	if o.NotificationQueue <= 0 {
		o.NotificationQueue = 128
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
	return &Conn{
		t: t, codec: c, handler: o.Handler, inline: o.Inline, onMsg: o.OnMessage, log: o.Logger,
		sem:     make(chan struct{}, o.MaxConcurrent),
		notes:   make(chan *Request, o.NotificationQueue),
		space:   make(chan struct{}, o.OutQueue),
		maxTry:  o.MaxTrySend,
		wake:    make(chan struct{}, 1),
		pending: make(map[int64]chan *codec.Message),
	}
}

// Codec returns the connection's codec.
func (c *Conn) Codec() codec.Codec { return c.codec }

// Start runs the connection's reader, writer and notification goroutines
// until ctx ends, the transport fails, or Close is called.
func (c *Conn) Start(ctx context.Context) {
	if !c.started.CompareAndSwap(false, true) {
		return
	}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	c.wg.Add(3)
	go c.readLoop()
	go c.writeLoop()
	go c.notifyLoop()
	context.AfterFunc(c.ctx, c.failPending)
}

// Done is closed when the connection has ended (Start must have been called).
func (c *Conn) Done() <-chan struct{} { return c.ctx.Done() }

// Err returns why the connection ended, or nil while it runs.
func (c *Conn) Err() error {
	if c.ctx.Err() == nil {
		return nil
	}
	return context.Cause(c.ctx)
}

// Close ends the connection and waits for its goroutines, including running
// handlers, to return. It is safe to call more than once.
func (c *Conn) Close() error {
	if !c.started.Load() {
		return nil
	}
	c.cancel(ErrClosed)
	c.wg.Wait()
	return nil
}

// Wait blocks until every goroutine of the connection has returned.
func (c *Conn) Wait() { c.wg.Wait() }

func (c *Conn) fail(err error) { c.cancel(err) }

func (c *Conn) failPending() {
	c.mu.Lock()
	c.closed = true
	pending := c.pending
	c.pending = map[int64]chan *codec.Message{}
	c.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
}

func (c *Conn) readLoop() {
	defer c.wg.Done()
	for {
		data, err := c.t.Read(c.ctx)
		if err != nil {
			c.fail(fmt.Errorf("rpc: read: %w", err))
			return
		}
		c.onMsg()
		var m codec.Message
		if err := c.codec.Decode(data, &m); err != nil {
			var de *codec.DecodeError
			if errors.As(err, &de) {
				c.respond(&codec.Message{ID: de.ID, HasID: de.HasID}, &Error{Code: de.Code, Message: de.Msg}, nil)
			}
			continue
		}
		switch {
		case m.IsResponse():
			c.deliver(&m)
		case m.IsNotification():
			req := &Request{Conn: c, Method: m.Method, Notification: true, Params: m.Params}
			select {
			case c.notes <- req:
			case <-c.ctx.Done():
				return
			}
		default:
			req := &Request{Conn: c, Method: m.Method, ID: m.ID, Params: m.Params}
			if c.inline(m.Method) {
				c.serve(req)
				continue
			}
			select {
			case c.sem <- struct{}{}:
			case <-c.ctx.Done():
				return
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				defer func() { <-c.sem }()
				c.serve(req)
			}()
		}
	}
}

func (c *Conn) notifyLoop() {
	defer c.wg.Done()
	for {
		select {
		case req := <-c.notes:
			c.serve(req)
		case <-c.ctx.Done():
			return
		}
	}
}

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

// respond sends the response for a request: err, or result.
func (c *Conn) respond(m *codec.Message, err error, result any) {
	if err != nil {
		we, internal := wireError(err)
		if internal {
			c.log.Error("rpc request failed", "method", m.Method, "id", m.ID, "err", err)
		}
		m.Error = &codec.Error{Code: we.Code, Message: we.Message}
		if we.Data != nil {
			if data, derr := c.codec.Marshal(we.Data); derr == nil {
				m.Error.Data = data
			}
		}
	} else {
		raw, merr := c.marshal(result)
		if merr != nil {
			c.log.Error("rpc result encoding failed", "id", m.ID, "err", merr)
			m.Error = &codec.Error{Code: ErrInternal.Code, Message: ErrInternal.Message}
		} else {
			m.Result = raw
		}
	}
	frame, eerr := c.codec.Encode(nil, m)
	if eerr != nil {
		c.log.Error("rpc response encoding failed", "id", m.ID, "err", eerr)
		return
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
	select {
	case c.space <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
	if !c.enqueue(outFrame{data: frame, token: true}, false) {
		<-c.space
		return ErrClosed
	}
	return nil
}

// TrySend queues an already encoded frame without waiting. It returns false
// when the connection has ended or MaxTrySend frames are already queued by
// TrySend. done, when non-nil, is called once the frame was written or
// dropped because the connection ended.
func (c *Conn) TrySend(frame []byte, done func()) bool {
	return c.enqueue(outFrame{data: frame, done: done, try: true}, true)
}

func (c *Conn) enqueue(f outFrame, try bool) bool {
	c.mu.Lock()
	if c.closed || (try && c.tryLen >= c.maxTry) {
		c.mu.Unlock()
		return false
	}
	if try {
		c.tryLen++
	}
	c.queue = append(c.queue, f)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

// Flush waits until every frame queued before it has been written.
func (c *Conn) Flush(ctx context.Context) error {
	marker := make(chan struct{})
	if !c.enqueue(outFrame{marker: marker}, false) {
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

func (c *Conn) writeLoop() {
	defer c.wg.Done()
	var batch []outFrame
	defer func() {
		// Release what was never written.
		c.mu.Lock()
		rest := append(batch, c.queue...)
		c.queue = nil
		c.closed = true
		c.mu.Unlock()
		for _, f := range rest {
			c.finish(f)
		}
	}()
	for {
		select {
		case <-c.wake:
		case <-c.ctx.Done():
			return
		}
		for {
			c.mu.Lock()
			batch, c.queue = c.queue, batch[:0]
			c.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for i, f := range batch {
				if f.data != nil {
					if err := c.t.Write(c.ctx, f.data); err != nil {
						batch = batch[i:]
						c.fail(fmt.Errorf("rpc: write: %w", err))
						return
					}
				}
				c.finish(f)
				batch[i] = outFrame{}
			}
		}
	}
}

func (c *Conn) finish(f outFrame) {
	if f.token {
		<-c.space
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
