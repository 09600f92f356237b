package wsnet

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ballet/gateway/gateway/internal/wsframe"
	"github.com/ballet/gateway/rpc"
)

// writer is the write side of a connection, and the hijacked socket a Transport frames its
// messages on, which it closes. It can hold back writes and send them in one syscall (between
// Cork and Uncork, writes are gathered in a pooled buffer), and it never makes its caller wait
// for the peer: bytes the socket does not take at once are kept and sent by a flusher
// goroutine of its own, in order, while the caller goes on (send.go). The frames it sends are
// built by frames.go; the peer's are read by the Transport's reader (reader.go).
type writer struct {
	net.Conn
	raw syscall.RawConn // for writes that do not wait; nil: every write waits

	mu       sync.Mutex
	corked   bool
	flushing bool          // out holds bytes to send: a flusher sends them
	flusher  bool          // a flusher runs; while flushing without one, the next wait is the flusher
	buf      *[]byte       // gathered while corked
	out      *pending      // accepted, not yet sent: the flusher's (non-nil while flushing)
	werr     error         // a write failed: so does every later one
	ctrl     int           // bytes of control frames in out
	closed   bool          // the close frame is written: nothing follows it
	drained  chan struct{} // closed as the flusher ends; made by a waiter
	stall    time.Duration // Options.FlushStall

	closer  *time.Timer // closeWithin's earliest, stopped by Close (mu)
	closeAt int64       // when closer fires, Unix ns (mu)

	drain    atomic.Bool // a frame was refused at its header: Close drains what the peer still sends
	draining atomic.Bool // Close has begun draining

	// stream is a streamed HTTP response's (stream.go), nil for a WebSocket: here rather than
	// in the Transport, whose size class a WebSocket's connection would otherwise pay for.
	stream *stream
}

// maxUnreadControl bounds the bytes of control frames (pongs, the close
// frame: written as they are due, outside Cork) that wait for a peer that
// does not read. Frames of the rpc connection are bounded by its queues;
// a peer that sends pings without reading their pongs is disconnected
// past this, rather than having the reader wait for it (a peer writing a
// large message while not reading would then wait for the reader too).
const maxUnreadControl = 64 << 10

// errUnreadControl ends a connection whose peer does not read its pongs.
var errUnreadControl = errors.New("wsnet: the peer does not read the answers to its pings")

// errClosedFrame is a write after the close frame.
var errClosedFrame = errors.New("wsnet: the connection has sent its close frame")

// flushChunk is what the flusher writes at once: the peer must take each
// within the connection's stall (Options.FlushStall).
const flushChunk = 64 << 10

func newWriter(c net.Conn, stall time.Duration) *writer {
	return &writer{Conn: c, raw: rawConnOf(c), stall: stall}
}

// Cork buffers start small (a batch is usually one or a few frames: a heartbeat to every
// connection at once should not take 16 KiB each) and grow with append; up to 256 KiB they go
// back to the pool.
var corkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeControl writes a control frame of opcode op (a pong, the close frame), or gathers it
// while corked. Like every write it does not wait for the peer; the bytes of control frames
// that wait for a peer that does not read are bounded (maxUnreadControl). Nothing follows a
// close frame (RFC 6455 §5.5.1).
func (c *writer) writeControl(op wsframe.Opcode, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosedFrame
	}
	if op == wsframe.OpClose {
		c.closed = true
	}
	if c.corked {
		*c.buf = wsframe.AppendHeader(*c.buf, op, len(payload))
		*c.buf = append(*c.buf, payload...)
		return nil
	}
	if c.flushing && c.werr == nil {
		if c.ctrl += wsframe.UnmaskedHeaderLen(len(payload)) + len(payload); c.ctrl > maxUnreadControl {
			c.werr = errUnreadControl
			_ = c.Conn.Close()
		}
	}
	fs := [1]rpc.Out{{Body: payload}}
	err := c.sendFramesLocked(framing{op: op}, fs[:])
	if c.flushing && !c.flusher {
		// Between a writeFrames and its caller's wait: a pong, or the close frame, does not
		// wait for the writer.
		c.flusher = true
		go c.flush()
	}
	return err
}

// Close closes the socket. After a frame was refused at its header, the peer may still be
// sending the frame: the socket is then shut for writing (the close frame has gone) and
// what arrives is read and dropped for up to CloseGrace before it is closed, so that the
// peer reads the close frame rather than a reset.
func (c *writer) Close() error {
	c.mu.Lock()
	if c.closer != nil {
		c.closer.Stop() // the socket and its session need not be held until it fires
	}
	c.mu.Unlock()
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !c.drain.Load() || !ok {
		return c.Conn.Close()
	}
	if c.draining.Swap(true) {
		return nil
	}
	_ = cw.CloseWrite()
	go func() {
		_ = c.Conn.SetReadDeadline(time.Now().Add(CloseGrace))
		_, _ = io.CopyN(io.Discard, c.Conn, 1<<20)
		_ = c.Conn.Close()
	}()
	return nil
}

// closeWithin closes the socket d from now, whatever is reading or writing it then: the
// bound of a close handshake with a peer that does not answer (the reader waits for the rest
// of a frame the peer began, with no deadline). Close stops it: a socket closed
// before then is left alone, and not held until d has passed.
func (c *writer) closeWithin(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := time.Now().Add(d).UnixNano()
	switch {
	case c.closer == nil:
		c.closer = time.AfterFunc(d, func() { _ = c.Conn.Close() })
	case at < c.closeAt:
		c.closer.Reset(d)
	default:
		return // the earlier bound holds
	}
	c.closeAt = at
}

// boundClose is closeWithin(d) unless a bound is set already: a caller's, which gave the
// peer the time of a flush before the close frame besides the close grace.
func (c *writer) boundClose(d time.Duration) {
	c.mu.Lock()
	bound := c.closer != nil
	c.mu.Unlock()
	if !bound {
		c.closeWithin(d)
	}
}

// Cork starts gathering writes.
func (c *writer) Cork() {
	c.mu.Lock()
	if !c.corked {
		c.corked = true
		c.buf = corkBufs.Get().(*[]byte)
	}
	c.mu.Unlock()
}

// writeFrame writes a message framed by fr, or gathers it while corked; after the close frame
// (or a stream's end) it writes nothing and fails.
func (c *writer) writeFrame(fr framing, frame []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosedFrame
	}
	if c.corked {
		*c.buf = fr.appendTail(append(fr.appendHead(*c.buf, len(frame)), frame...))
		return nil
	}
	fs := [1]rpc.Out{{Body: frame}}
	return c.sendFramesLocked(fr, fs[:])
}

// Uncork sends what was gathered, in one write, and stops gathering. Like
// Write it does not wait for the peer: wait does.
func (c *writer) Uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return nil
	}
	c.corked = false
	var err error
	if len(*c.buf) > 0 {
		err = c.sendLocked(*c.buf)
	}
	putBuf(c.buf)
	c.buf = nil
	return err
}

// canTry reports whether a write now would go straight to the socket
// without waiting: nothing is held back for a slow peer.
func (c *writer) canTry() bool {
	if c.raw == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.flushing && !c.corked && c.werr == nil
}

// backlog is the number of bytes accepted and not yet sent.
func (c *writer) backlog() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out == nil {
		return 0
	}
	return c.out.n
}

// wait returns once every accepted byte has been sent, or with the error
// that ended the sending.
func (c *writer) wait() error {
	c.mu.Lock()
	if !c.flushing {
		err := c.werr
		c.mu.Unlock()
		return err
	}
	if !c.flusher {
		// The bytes a writeFrames left: sent on this goroutine.
		c.flusher = true
		c.mu.Unlock()
		c.flush()
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.werr
	}
	if c.drained == nil {
		c.drained = make(chan struct{})
	}
	ch := c.drained
	c.mu.Unlock()
	<-ch
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.werr
}

func putBuf(b *[]byte) {
	if cap(*b) <= 256<<10 {
		*b = (*b)[:0]
		corkBufs.Put(b)
	}
}
