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
// connection 4 KiB read and write buffers; most frames are a few hundred
// bytes, larger ones pass through the buffers directly, and batches are
// gathered by corkConn, so small buffers cost nothing but save 7 KiB per
// idle connection.
const (
	leanReadBuffer  = 512
	leanWriteBuffer = 512
)

// leanWriter wraps the upgrade's ResponseWriter so that the WebSocket
// library gets a corkable connection with small buffers when it hijacks.
type leanWriter struct {
	http.ResponseWriter
	conn *corkConn
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
	return w.conn, bufio.NewReadWriter(br, bufio.NewWriterSize(w.conn, leanWriteBuffer)), nil
}

// corkConn can hold back writes and send them in one syscall: between Cork
// and Uncork, writes are gathered in a pooled buffer.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    *[]byte
}

var corkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

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
