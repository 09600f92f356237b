package wsnet

import (
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
)

// corkConn is the hijacked connection under the WebSocket library. It can
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
	flushing bool          // a flusher goroutine sends out
	buf      *[]byte       // gathered while corked
	out      *[]byte       // accepted, not yet sent: the flusher's (non-nil while flushing)
	werr     error         // a write failed: so does every later one
	ctrl     int           // bytes of uncorked writes in out
	lib      libFrames     // the library's frames, as Write sees them
	drained  chan struct{} // closed as the flusher ends; made by a waiter
	stall    time.Duration // Options.FlushStall

	closer  *time.Timer // closeWithin's earliest, stopped by Close (mu)
	closeAt int64       // when closer fires, Unix ns (mu)

	// The reader's; see Read.
	rbuf  *[]byte
	roff  int
	guard *frameGuard // the peer's frame headers, once Attach has run
}

// maxUnreadControl bounds the bytes the WebSocket library writes on its
// own (pongs, close frames: writes outside Cork) that wait for a peer that
// does not read. Frames of the rpc connection are bounded by its queues;
// a peer that sends pings without reading their pongs is disconnected
// past this, rather than having the reader wait for it (a peer writing a
// large message while not reading would then wait for the reader too).
const maxUnreadControl = 64 << 10

// errUnreadControl ends a connection whose peer does not read its pongs.
var errUnreadControl = errors.New("wsnet: the peer does not read the answers to its pings")

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

// Read serves a small read from a pooled buffer filled by one read of up
// to readChunk bytes, and a large one directly. It is called by one
// reader at a time (the WebSocket library's read lock). The guard sees
// what it returns.
func (c *corkConn) Read(p []byte) (int, error) {
	n, err := c.read(p)
	if c.guard != nil && n > 0 {
		if gerr := c.guard.scan(p[:n]); gerr != nil {
			return 0, gerr
		}
	}
	return n, err
}

func (c *corkConn) read(p []byte) (int, error) {
	if c.rbuf != nil {
		n := copy(p, (*c.rbuf)[c.roff:])
		c.roff += n
		if c.roff == len(*c.rbuf) {
			c.releaseRead()
		}
		return n, nil
	}
	if len(p) >= readChunk {
		return c.Conn.Read(p)
	}
	b := readBufs.Get().(*[]byte)
	n, err := c.Conn.Read((*b)[:readChunk])
	if n <= len(p) {
		copy(p, (*b)[:n])
		readBufs.Put(b)
		return n, err
	}
	// Keep the rest; an error comes again with the next read.
	*b = (*b)[:n]
	c.rbuf, c.roff = b, copy(p, *b)
	return c.roff, nil
}

// unread makes p (copied) the first bytes Read returns.
func (c *corkConn) unread(p []byte) {
	b := make([]byte, len(p), max(len(p), readChunk))
	copy(b, p)
	c.rbuf, c.roff = &b, 0
}

// readPending reports whether Read holds unread bytes.
func (c *corkConn) readPending() bool { return c.rbuf != nil }

func (c *corkConn) releaseRead() {
	*c.rbuf = (*c.rbuf)[:readChunk]
	readBufs.Put(c.rbuf)
	c.rbuf, c.roff = nil, 0
}

// Write sends p, or gathers it while corked. It does not wait for the peer.
// It is the WebSocket library's write: its frames, in pieces.
func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lib.scan(p)
	if c.corked {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	if c.flushing && c.werr == nil {
		if c.ctrl += len(p); c.ctrl > maxUnreadControl {
			c.werr = errUnreadControl
			_ = c.Conn.Close()
		}
	}
	if err := c.sendLocked(p); err != nil {
		return 0, err
	}
	return len(p), nil
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
	if c.guard == nil || c.guard.refused.Load() == 0 || !ok {
		return c.Conn.Close()
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
// bound of a close handshake with a peer that does not answer (the WebSocket library waits
// for the rest of a frame the peer began, with no deadline). Close stops it: a socket closed
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

// Cork starts gathering writes.
func (c *corkConn) Cork() {
	c.mu.Lock()
	if !c.corked {
		c.corked = true
		c.buf = corkBufs.Get().(*[]byte)
	}
	c.mu.Unlock()
}

// writeFrame writes a data frame of opcode op built here, or gathers it while corked. It
// reports false, having written nothing, while the library is inside a frame of its own or
// once it has written its close frame: the library must write this one then (it waits for its
// own frame, or refuses).
func (c *corkConn) writeFrame(op byte, frame []byte) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.lib.between() || c.lib.closed {
		return false, nil
	}
	if c.corked {
		*c.buf = appendHeader(*c.buf, op, len(frame))
		*c.buf = append(*c.buf, frame...)
		return true, nil
	}
	fs := [1][]byte{frame}
	return true, c.sendFramesLocked(op, fs[:])
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
	return len(*c.out)
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

// sendLocked sends p after the bytes already accepted. What the socket does
// not take at once is copied to out and a flusher sends it, so that neither
// the caller nor the WebSocket library's write lock ever waits for the peer.
// Without a raw connection the write waits.
func (c *corkConn) sendLocked(p []byte) error {
	if c.werr != nil {
		return c.werr
	}
	if c.flushing {
		*c.out = append(*c.out, p...)
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
		c.out = corkBufs.Get().(*[]byte)
		*c.out = append(*c.out, p[n:]...)
		c.flushing = true
		go c.flush()
	}
	return nil
}

// sendFramesLocked sends frames of opcode op, each after its header, as sendLocked sends
// bytes: on a raw connection in vectored writes of the frames as they are, with no copy
// unless the socket leaves some of them to the flusher.
func (c *corkConn) sendFramesLocked(op byte, frames [][]byte) error {
	if c.werr != nil {
		return c.werr
	}
	if c.flushing {
		*c.out = appendFrames(*c.out, op, frames)
		return nil
	}
	if c.raw == nil {
		b := corkBufs.Get().(*[]byte)
		*b = appendFrames(slices.Grow(*b, framesLen(frames)), op, frames)
		err := c.sendLocked(*b)
		putBuf(b)
		return err
	}
	g := gathers.Get().(*gather)
	defer g.put()
	for len(frames) > 0 {
		k := min(len(frames), maxGatherFrames)
		total := g.build(op, frames[:k])
		n, err := c.trySendv(g)
		if err != nil {
			c.werr = err
			return err
		}
		frames = frames[k:]
		if n < total {
			c.out = corkBufs.Get().(*[]byte)
			*c.out = slices.Grow(*c.out, total-n+framesLen(frames))
			*c.out = appendParts(*c.out, g.parts, n)
			*c.out = appendFrames(*c.out, op, frames)
			c.flushing = true
			go c.flush()
			return nil
		}
	}
	return nil
}

// trySend writes as much of p as the socket takes now.
func (c *corkConn) trySend(p []byte) (int, error) {
	g := gathers.Get().(*gather)
	defer g.put()
	g.parts = append(g.parts[:0], p)
	return c.trySendv(g)
}

// sent is the outcome of a write that does not wait: n bytes sent, the system call's err
// (EAGAIN: the socket took no more) and the raw connection's rerr.
func (c *corkConn) sent(n int, err, rerr error) (int, error) {
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

// flush sends out until it is empty or a write fails (the connection was
// closed: then the rest is dropped). It is the only writer to the socket
// while it runs.
func (c *corkConn) flush() {
	for {
		c.mu.Lock()
		if c.werr != nil || len(*c.out) == 0 {
			putBuf(c.out)
			c.out = nil
			c.flushing = false
			c.ctrl = 0
			if c.drained != nil {
				close(c.drained)
				c.drained = nil
			}
			c.mu.Unlock()
			return
		}
		b := c.out
		c.out = corkBufs.Get().(*[]byte)
		c.mu.Unlock()
		err := c.writeAll(*b)
		putBuf(b)
		if err != nil {
			c.mu.Lock()
			c.werr = err
			c.mu.Unlock()
		}
	}
}

// writeAll writes p in chunks, each of which the peer must take within
// c.stall: a slow peer that keeps reading is served, a stalled one fails.
func (c *corkConn) writeAll(p []byte) error {
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

func putBuf(b *[]byte) {
	if cap(*b) <= 256<<10 {
		*b = (*b)[:0]
		corkBufs.Put(b)
	}
}
