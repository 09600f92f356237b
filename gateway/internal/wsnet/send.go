package wsnet

import (
	"net"
	"os"
	"syscall"
	"time"

	"github.com/ballet/gateway/rpc"
)

// How a writer sends: every write goes to the socket at once, as much as it takes without
// waiting, and what it does not take is kept (pending) for a flusher, which sends it in order
// while the caller goes on. What is kept of a message is a copy of its own bytes (header,
// envelope) and a reference to its body when the body stays unchanged (rpc.Out.Keep: an
// event's body, shared with every connection that sends it): a peer that stops reading holds
// what the socket did not take of one write, and of a burst's bodies only references.

// pending is what a connection accepted and has not sent: its pieces in order, n bytes.
type pending struct {
	parts [][]byte
	n     int
}

// add appends q's pieces.
func (p *pending) add(q *pending) {
	p.parts = append(p.parts, q.parts...)
	p.n += q.n
}

// addCopy appends a copy of b.
func (p *pending) addCopy(b []byte) {
	if len(b) > 0 {
		p.parts = append(p.parts, append(make([]byte, 0, len(b)), b...))
		p.n += len(b)
	}
}

// sendLocked sends p after the bytes already accepted. What the socket does not take at once
// is copied to out and a flusher sends it, so that the caller never waits for the peer.
// Without a raw connection the write waits.
func (c *writer) sendLocked(p []byte) error {
	if c.werr != nil {
		return c.werr
	}
	if c.flushing {
		c.out.addCopy(p)
		return nil
	}
	if c.raw == nil {
		_, err := c.Conn.Write(p)
		c.werr = err
		return err
	}
	n, err := c.trySend(p)
	if err != nil {
		c.werr = err
		return err
	}
	if n < len(p) {
		c.out = &pending{}
		c.out.addCopy(p[n:])
		c.flushing, c.flusher = true, true
		go c.flush()
	}
	return nil
}

// sendFramesLocked sends frames framed by fr, each after its header, as sendLocked sends
// bytes, and a flusher goroutine sends what the socket did not take.
func (c *writer) sendFramesLocked(fr framing, frames []rpc.Out) error {
	left, err := c.sendOutsLocked(fr, frames)
	if left {
		c.flusher = true
		go c.flush()
	}
	return err
}

// sendOutsLocked sends frames on a raw connection in vectored writes of their pieces as they
// are, with no copy unless the socket leaves some of them for later: then they are kept in
// out (a copy of what is not Keep), flushing is set, and it reports true: the caller must
// run flush, on a goroutine of its own or its own. Without a raw connection they are written
// at once, waiting.
func (c *writer) sendOutsLocked(fr framing, frames []rpc.Out) (bool, error) {
	if c.werr != nil {
		return false, c.werr
	}
	g := gathers.Get().(*gather)
	defer g.put()
	if c.flushing {
		for len(frames) > 0 {
			k := min(len(frames), maxGatherFrames)
			g.build(fr, frames[:k])
			c.out.add(g.rest(0))
			frames = frames[k:]
		}
		return false, nil
	}
	for len(frames) > 0 {
		k := min(len(frames), maxGatherFrames)
		total := g.build(fr, frames[:k])
		if c.raw == nil {
			for _, p := range g.parts {
				if _, err := c.Conn.Write(p); err != nil {
					c.werr = err
					return false, err
				}
			}
			frames = frames[k:]
			continue
		}
		n, err := c.trySendv(g)
		if err != nil {
			c.werr = err
			return false, err
		}
		frames = frames[k:]
		if n < total {
			c.out = g.rest(n)
			for len(frames) > 0 {
				k := min(len(frames), maxGatherFrames)
				g.build(fr, frames[:k])
				c.out.add(g.rest(0))
				frames = frames[k:]
			}
			c.flushing = true
			return true, nil
		}
	}
	return false, nil
}

// writeFrames sends frames after what was accepted before (once that is sent: a writer holds
// back one write for a slow peer, not two), as much as the socket takes now, and keeps the rest
// without a flusher: the caller's next wait sends it, on the caller's goroutine, as a writer that
// waits for its peer anyway would. It does not wait for the peer.
func (c *writer) writeFrames(fr framing, frames []rpc.Out) error {
	if err := c.wait(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosedFrame
	}
	_, err := c.sendOutsLocked(fr, frames)
	return err
}

// trySend writes as much of p as the socket takes now.
func (c *writer) trySend(p []byte) (int, error) {
	g := gathers.Get().(*gather)
	defer g.put()
	g.parts = append(g.parts[:0], p)
	return c.trySendv(g)
}

// sent is the outcome of a write that does not wait: n bytes sent, the system call's err
// (EAGAIN: the socket took no more) and the raw connection's rerr.
func (c *writer) sent(n int, err, rerr error) (int, error) {
	if err == syscall.EAGAIN {
		err = nil
	}
	if rerr != nil {
		return n, rerr
	}
	if err != nil {
		return n, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("write", err)}
	}
	return n, nil
}

// flush sends out until it is empty or a write fails (the connection was closed: then the
// rest is dropped). It is the only writer to the socket while it runs.
func (c *writer) flush() {
	for {
		c.mu.Lock()
		if c.werr != nil || c.out.n == 0 {
			c.out = nil
			c.flushing, c.flusher = false, false
			c.ctrl = 0
			if c.drained != nil {
				close(c.drained)
				c.drained = nil
			}
			c.mu.Unlock()
			return
		}
		p := c.out
		c.out = &pending{} // what is sent meanwhile: grown as it comes
		c.mu.Unlock()
		if err := c.writeParts(p.parts); err != nil {
			c.mu.Lock()
			c.werr = err
			c.mu.Unlock()
		}
	}
}

// writeParts writes parts in order, waiting for the socket while it takes no more: the peer
// must take each flushChunk bytes within c.stall, so that a slow peer that keeps reading is
// served and a stalled one fails.
func (c *writer) writeParts(parts [][]byte) error {
	if c.raw == nil {
		for _, p := range parts {
			if err := c.writeAll(p); err != nil {
				return err
			}
		}
		return nil
	}
	g := gathers.Get().(*gather)
	defer g.put()
	taken := 0
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
		return err
	}
	for len(parts) > 0 {
		k := min(len(parts), maxGatherParts)
		g.parts = append(g.parts[:0], parts[:k]...)
		n, err := c.sendvWait(g)
		if err != nil {
			return err
		}
		if taken += n; taken >= flushChunk {
			taken = 0
			if err := c.Conn.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
				return err
			}
		}
		for n > 0 && len(parts) > 0 {
			if n < len(parts[0]) {
				parts[0] = parts[0][n:]
				break
			}
			n -= len(parts[0])
			parts[0] = nil // sent: not kept by what is left
			parts = parts[1:]
		}
	}
	return nil
}

// writeAll writes p in chunks, each of which the peer must take within
// c.stall: a slow peer that keeps reading is served, a stalled one fails.
func (c *writer) writeAll(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), flushChunk)
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
			return err
		}
		if _, err := c.Conn.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}
