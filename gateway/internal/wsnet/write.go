package wsnet

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ballet/gateway/rpc"
)

// corkConn is the hijacked connection a Transport frames its messages on. It can
// hold back writes and send them in one syscall (between Cork and Uncork,
// writes are gathered in a pooled buffer), and it never makes a writer wait
// for the peer: bytes the socket does not take at once are kept and sent by
// a flusher goroutine of its own, in order, while the writer goes on (see
// send). Reads go through a pooled buffer, held only while it has unread
// bytes.
type corkConn struct {
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

	// The reader's; see next.
	rbuf *[]byte
	roff int

	drain    atomic.Bool // a frame was refused at its header: Close drains what the peer still sends
	draining atomic.Bool // Close has begun draining
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

func newCorkConn(c net.Conn, stall time.Duration) *corkConn {
	return &corkConn{Conn: c, raw: rawConnOf(c), stall: stall}
}

var (
	// Cork buffers start small (a batch is usually one or a few frames: a
	// heartbeat to every connection at once should not take 16 KiB each)
	// and grow with append; up to 256 KiB they go back to the pool.
	corkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
	readBufs = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}
)

// readChunk is the size of the pooled read buffer.
const readChunk = 4 << 10

// The reader's side: Transport.Read takes the peer's frames from a pooled buffer, filled by
// reads of up to readChunk bytes and held only while it has unread bytes. A payload of
// readChunk bytes or more is read straight into its message. One reader at a time (the
// Transport's read lock).

// next returns the next n bytes read (n <= readChunk), valid until the next read.
func (c *corkConn) next(n int) ([]byte, error) {
	if c.rbuf == nil {
		c.rbuf = readBufs.Get().(*[]byte)
		*c.rbuf = (*c.rbuf)[:0]
		c.roff = 0
	}
	b := *c.rbuf
	if len(b)-c.roff < n && cap(b)-c.roff < n { // make room: move the unread bytes to the front
		k := copy(b[:cap(b)], b[c.roff:])
		b, c.roff = b[:k], 0
	}
	for len(b)-c.roff < n {
		m, err := c.Conn.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil && len(b)-c.roff < n {
			*c.rbuf = b
			return nil, err
		}
	}
	*c.rbuf = b
	p := b[c.roff : c.roff+n]
	c.roff += n
	return p, nil
}

// readFull fills p with the next bytes read.
func (c *corkConn) readFull(p []byte) error {
	for len(p) > 0 {
		if c.rbuf != nil && c.roff < len(*c.rbuf) {
			k := copy(p, (*c.rbuf)[c.roff:])
			c.roff += k
			p = p[k:]
			continue
		}
		if len(p) >= readChunk {
			n, err := c.Conn.Read(p)
			if err != nil && n < len(p) {
				return err
			}
			p = p[n:]
			continue
		}
		if _, err := c.next(len(p)); err != nil {
			return err
		}
		c.roff -= len(p) // next made them unread; copy them above
	}
	return nil
}

// skip reads and drops the next n bytes.
func (c *corkConn) skip(n int64) error {
	for n > 0 {
		k := int(min(n, readChunk))
		if _, err := c.next(k); err != nil {
			return err
		}
		n -= int64(k)
	}
	return nil
}

// doneReading gives the read buffer back when nothing in it is unread: between messages, an
// idle connection holds none.
func (c *corkConn) doneReading() {
	if c.rbuf != nil && c.roff == len(*c.rbuf) {
		*c.rbuf = (*c.rbuf)[:readChunk]
		readBufs.Put(c.rbuf)
		c.rbuf, c.roff = nil, 0
	}
}

// unread makes p (copied) the first bytes read.
func (c *corkConn) unread(p []byte) {
	b := make([]byte, len(p), max(len(p), readChunk))
	copy(b, p)
	c.rbuf, c.roff = &b, 0
}

// readPending reports whether bytes read are not yet taken.
func (c *corkConn) readPending() bool { return c.rbuf != nil && c.roff < len(*c.rbuf) }

// writeControl writes a control frame of opcode op (a pong, the close frame), or gathers it
// while corked. Like every write it does not wait for the peer; the bytes of control frames
// that wait for a peer that does not read are bounded (maxUnreadControl). Nothing follows a
// close frame (RFC 6455 §5.5.1).
func (c *corkConn) writeControl(op byte, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosedFrame
	}
	if op == opClose {
		c.closed = true
	}
	if c.corked {
		*c.buf = appendHeader(*c.buf, op, len(payload))
		*c.buf = append(*c.buf, payload...)
		return nil
	}
	if c.flushing && c.werr == nil {
		if c.ctrl += headerLen(len(payload)) + len(payload); c.ctrl > maxUnreadControl {
			c.werr = errUnreadControl
			_ = c.Conn.Close()
		}
	}
	fs := [1]rpc.Out{{Body: payload}}
	err := c.sendFramesLocked(op, fs[:])
	if c.flushing && !c.flusher {
		// Between a writeFrames and its writer's wait: a pong, or the close frame, does not
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
func (c *corkConn) Close() error {
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
func (c *corkConn) closeWithin(d time.Duration) {
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
func (c *corkConn) boundClose(d time.Duration) {
	c.mu.Lock()
	bound := c.closer != nil
	c.mu.Unlock()
	if !bound {
		c.closeWithin(d)
	}
}

// Cork starts gathering writes.
func (c *corkConn) Cork() {
	c.mu.Lock()
	if !c.corked {
		c.corked = true
		c.buf = corkBufs.Get().(*[]byte)
	}
	c.mu.Unlock()
}

// writeFrame writes a data frame of opcode op, or gathers it while corked; after the close
// frame it writes nothing and fails.
func (c *corkConn) writeFrame(op byte, frame []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosedFrame
	}
	if c.corked {
		*c.buf = appendHeader(*c.buf, op, len(frame))
		*c.buf = append(*c.buf, frame...)
		return nil
	}
	fs := [1]rpc.Out{{Body: frame}}
	return c.sendFramesLocked(op, fs[:])
}

// Uncork sends what was gathered, in one write, and stops gathering. Like
// Write it does not wait for the peer: wait does.
func (c *corkConn) Uncork() error {
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
func (c *corkConn) canTry() bool {
	if c.raw == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.flushing && !c.corked && c.werr == nil
}

// backlog is the number of bytes accepted and not yet sent.
func (c *corkConn) backlog() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.out == nil {
		return 0
	}
	return c.out.n
}

// wait returns once every accepted byte has been sent, or with the error
// that ended the sending.
func (c *corkConn) wait() error {
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
