package rpc

import (
	"errors"
	"fmt"

	"github.com/ballet/gateway/codec"
)

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
		c.hooks.OnMessage()
		refused := c.hooks.Admit(c.ctx)
		if errors.Is(refused, ErrSkip) {
			continue
		}
		var m codec.Message
		var de *codec.DecodeError
		if err := c.codec.Decode(data, &m); err != nil && !errors.As(err, &de) {
			de = &codec.DecodeError{Code: codec.CodeParseError, Msg: "parse error"}
		}
		if !c.hooks.Screen(&m, de) {
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
			if c.hooks.Inline(m.Method) {
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
		r := c.rareLocked()
		if r.slotFreed == nil {
			r.slotFreed = make(chan struct{})
		}
		freed := r.slotFreed
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
	if r := c.rare; r != nil && r.slotFreed != nil {
		close(r.slotFreed)
		r.slotFreed = nil
	}
	c.mu.Unlock()
}

// resume continues a parked reader on a new goroutine.
func (c *Conn) resume() { c.workers.run(c.resumeRead) }

func (c *Conn) resumeRead() { c.readLoop(true) }
