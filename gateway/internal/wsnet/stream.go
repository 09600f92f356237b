package wsnet

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/gateway/internal/poller"
	"github.com/ballet/gateway/gateway/internal/wsframe"
	"github.com/ballet/gateway/rpc"
)

// Streamed HTTP responses (POST /rpc): a Transport that Upgrader.Stream makes of a request
// carries the same session as a WebSocket's, with the same writer, but frames each message as
// a chunk of the response's chunked transfer coding (RFC 9112 §7.1) holding one line of NDJSON
// or one Server-Sent Event, and reads nothing but the request: the first Read returns it, and
// the next one ends the connection as soon as the client sends anything or goes away. Ending it
// writes the owner's last message (StreamOptions.End) and the last chunk, then closes the
// socket: a response is never followed by another on its socket.

// framing is how a message goes on the socket: a WebSocket frame of op, or, on a streamed
// response, its chunk.
type framing struct {
	op     wsframe.Opcode
	stream *streamFraming // nil: a WebSocket frame
}

// streamFraming frames messages on a streamed response: each between prefix and suffix, in a
// chunk of its own when chunked (HTTP/1.1), else as it is (HTTP/1.0: the body ends with the
// connection).
type streamFraming struct {
	chunked        bool
	prefix, suffix string
}

// The framings of a streamed response's messages: a line of NDJSON, a Server-Sent Event.
var (
	lineFraming = streamFraming{suffix: "\n"}
	sseFraming  = streamFraming{prefix: "data: ", suffix: "\n\n"}
)

// maxOverhead is the most bytes fr adds to a message.
func (fr framing) maxOverhead() int {
	if fr.stream == nil {
		return wsframe.MaxUnmaskedHeaderLen
	}
	return 16 + 2 + len(fr.stream.prefix) + len(fr.stream.suffix) + 2
}

// appendHead appends what goes before a message of size bytes.
func (fr framing) appendHead(dst []byte, size int) []byte {
	s := fr.stream
	if s == nil {
		return wsframe.AppendHeader(dst, fr.op, size)
	}
	if s.chunked {
		dst = strconv.AppendUint(dst, uint64(len(s.prefix)+size+len(s.suffix)), 16)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, s.prefix...)
}

// appendTail appends what goes after a message.
func (fr framing) appendTail(dst []byte) []byte {
	s := fr.stream
	if s == nil {
		return dst
	}
	dst = append(dst, s.suffix...)
	if s.chunked {
		dst = append(dst, "\r\n"...)
	}
	return dst
}

// StreamOptions are one streamed response's.
type StreamOptions struct {
	// Request is the request the response answers: the first message Read returns.
	Request []byte
	// SSE frames each message as a Server-Sent Event (text/event-stream); else each is a line
	// (application/x-ndjson).
	SSE bool
	// End is the last message of a response the server ends with code and reason, nil for
	// none; it runs once, as the response ends.
	End func(code websocket.StatusCode, reason string) []byte
}

// stream is what a Transport of a streamed response holds besides a WebSocket's.
type stream struct {
	framing streamFraming
	first   []byte // the request, until Read returns it (written under the Transport's mu too)
	end     func(code websocket.StatusCode, reason string) []byte
}

// errStreamRead ends a streamed response whose client sent bytes after its request: nothing
// may follow one, so it is taken as the client's end.
var errStreamRead = errors.New("wsnet: the client sent bytes after its request")

// Stream answers r 200 with a streamed body, whose Transport carries nothing until Attach. The
// response's header is w's (set before the call) and its Content-Type, Cache-Control (no-store:
// nothing of it may be cached) and X-Accel-Buffering (no: a proxy that honours it, such as
// nginx, passes each message on as it comes). Its socket is closed after it.
func (u *Upgrader) Stream(w http.ResponseWriter, r *http.Request, o *StreamOptions) (*Transport, error) {
	h := w.Header()
	fr := lineFraming
	h.Set("Content-Type", "application/x-ndjson")
	if o.SSE {
		fr = sseFraming
		h.Set("Content-Type", "text/event-stream")
	}
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Connection", "close")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	fr.chunked = r.ProtoAtLeast(1, 1)
	if fr.chunked {
		h.Set("Transfer-Encoding", "chunked")
	}
	head := []byte("HTTP/1.1 200 OK\r\n")
	if !fr.chunked {
		head = []byte("HTTP/1.0 200 OK\r\n")
	}
	for k, vs := range h {
		for _, v := range vs {
			head = append(append(append(append(head, k...), ": "...), v...), "\r\n"...)
		}
	}
	head = append(head, "\r\n"...)
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, http.StatusText(http.StatusNotImplemented), http.StatusNotImplemented)
		return nil, err
	}
	_ = c.SetDeadline(time.Time{}) // the body's read deadline is past: the request was read
	t := u.transport(c, brw)
	t.w.stream = &stream{framing: fr, first: o.Request, end: o.End}
	t.w.mu.Lock()
	err = t.w.sendLocked(head)
	t.w.mu.Unlock()
	if err != nil {
		_ = t.w.Close()
		return nil, err
	}
	return t, nil
}

// transport makes the Transport of a hijacked connection c, whose bytes net/http has read and
// not yet given to anyone are in brw.
func (u *Upgrader) transport(c net.Conn, brw *bufio.ReadWriter) *Transport {
	t := &Transport{}
	c, t.fd = poller.Own(c, u.poller, &t.pc)
	t.setConn(c, u.stall, &u.partial)
	t.pc = u.poller.Conn(t.w.raw)
	// Bytes net/http has already read must stay readable: they go first into the connection's
	// read buffer, where Park sees them. A client may send them before the 101 arrives, or
	// right after it while net/http still reads. The rest of net/http's buffers go with brw.
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ := brw.Reader.Peek(n)
		t.r.unread(early)
	}
	return t
}

// framing is how t frames its messages.
func (t *Transport) framing() framing {
	if t.w.stream != nil {
		return framing{stream: &t.w.stream.framing}
	}
	return framing{op: t.opcode()}
}

// readStream is Read on a streamed response: the request, then the end of the connection once
// the client sends anything more or goes away.
func (t *Transport) readStream() ([]byte, error) {
	t.r.mu.Lock()
	t.mu.Lock()
	m := t.w.stream.first
	t.w.stream.first = nil
	t.mu.Unlock()
	if m != nil {
		t.r.mu.Unlock()
		return m, nil
	}
	err := t.r.err
	if err == nil {
		if _, err = t.r.next(1); err == nil {
			err = errStreamRead
		}
		t.r.err = err
	}
	t.r.off = 0
	if t.r.buf != nil {
		*t.r.buf = (*t.r.buf)[:0]
	}
	t.r.done()
	t.r.mu.Unlock()
	t.readerLeft()
	return nil, err
}

// endStream is CloseHandshake on a streamed response: the last message End gives for code and
// reason, the last chunk, and the socket closed once they are sent (or CloseGrace has passed, or
// the bound CloseWithin set).
func (t *Transport) endStream(code websocket.StatusCode, reason string) error {
	var last []byte
	if t.w.stream.end != nil {
		last = t.w.stream.end(code, reason)
	}
	var end []byte
	if t.w.stream.framing.chunked {
		end = []byte("0\r\n\r\n")
	}
	if t.w.writeEnd(t.framing(), last, end) == nil {
		_ = t.w.wait()
	}
	return t.w.Close()
}

// writeEnd writes the last message of a streamed response, framed by fr, then end, and nothing
// after them; like every write it does not wait for the peer.
func (c *writer) writeEnd(fr framing, last, end []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClosedFrame
	}
	c.closed = true
	if c.corked {
		if last != nil {
			*c.buf = fr.appendTail(append(fr.appendHead(*c.buf, len(last)), last...))
		}
		*c.buf = append(*c.buf, end...)
		return nil
	}
	var err error
	if last != nil {
		fs := [1]rpc.Out{{Body: last}}
		err = c.sendFramesLocked(fr, fs[:])
	}
	if err == nil && len(end) > 0 {
		err = c.sendLocked(end)
	}
	if c.flushing && !c.flusher {
		c.flusher = true
		go c.flush()
	}
	return err
}
