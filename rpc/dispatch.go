package rpc

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/ballet/gateway/codec"
)

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
	var ch chan *codec.Message
	ok := false
	c.mu.Lock()
	if r := c.rare; r != nil {
		ch, ok = r.pending[m.ID]
		delete(r.pending, m.ID)
	}
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
	ch := make(chan *codec.Message, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	r := c.rareLocked()
	r.nextID++
	id := r.nextID
	if r.pending == nil {
		r.pending = make(map[int64]chan *codec.Message)
	}
	r.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(r.pending, id)
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
