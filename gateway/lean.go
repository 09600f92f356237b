package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
)

// Buffer sizes on a hijacked /rpc connection. net/http hands a hijacked
// connection 4 KiB read and write buffers, 8 KiB an idle connection holds
// for nothing. The WebSocket library's buffers here are the smallest bufio
// allows: reads go through corkConn's pooled buffer, held only while it
// has unread bytes, and the writer's frames are gathered by corkConn.
const (
	leanReadBuffer  = 16
	leanWriteBuffer = 16
	readChunk       = 4 << 10 // corkConn's pooled read buffer
)

// leanWriter wraps the upgrade's ResponseWriter so that the WebSocket
// library gets a corkable connection with small buffers when it hijacks.
type leanWriter struct {
	http.ResponseWriter
	conn  *corkConn
	br    *bufio.Reader // the WebSocket library's reader
	early bool          // the client sent bytes before the 101
}

var _ http.Hijacker = (*leanWriter)(nil)

func (w *leanWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("gateway: the response writer cannot be hijacked")
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: c}
	// Bytes net/http has already read (a client that did not wait for the
	// 101) must stay readable: they go first into the new reader's buffer.
	var r io.Reader = w.conn
	n := brw.Reader.Buffered()
	if n > 0 {
		early, _ := brw.Reader.Peek(n)
		r = io.MultiReader(bytes.NewReader(bytes.Clone(early)), w.conn)
	}
	br := bufio.NewReaderSize(r, max(leanReadBuffer, n))
	if n > 0 {
		_, _ = br.Peek(n)
	}
	w.br, w.early = br, n > 0
	return w.conn, bufio.NewReadWriter(br, bufio.NewWriterSize(w.conn, leanWriteBuffer)), nil
}

// corkConn can hold back writes and send them in one syscall: between Cork
// and Uncork, writes are gathered in a pooled buffer. Reads go through a
// pooled buffer too, held only while it has unread bytes.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    *[]byte

	// The reader's; see Read.
	rbuf *[]byte
	roff int
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
// reader at a time (the WebSocket library's read lock).
func (c *corkConn) Read(p []byte) (int, error) {
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

// readPending reports whether Read holds unread bytes.
func (c *corkConn) readPending() bool { return c.rbuf != nil }

func (c *corkConn) releaseRead() {
	*c.rbuf = (*c.rbuf)[:readChunk]
	readBufs.Put(c.rbuf)
	c.rbuf, c.roff = nil, 0
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
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

// Uncork writes what was gathered, in one write, and stops gathering.
func (c *corkConn) Uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return nil
	}
	c.corked = false
	var err error
	if len(*c.buf) > 0 {
		_, err = c.Conn.Write(*c.buf)
	}
	if cap(*c.buf) <= 256<<10 {
		*c.buf = (*c.buf)[:0]
		corkBufs.Put(c.buf)
	}
	c.buf = nil
	return err
}
