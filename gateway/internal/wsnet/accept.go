package wsnet

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

// Options adjust an Upgrader. A nil *Options means the defaults.
type Options struct {
	// FlushStall bounds a peer that does not read: what its socket did not take at once is sent
	// in chunks of 64 KiB, each of which it must take within FlushStall, or it is taken to be
	// gone and its connection fails, rather than holding a flusher until the heartbeat rule
	// notices (which a peer that sends but does not read never trips). Zero means 30 s.
	FlushStall time.Duration
}

const defaultFlushStall = 30 * time.Second

// Upgrader upgrades requests to WebSockets whose connections this package
// serves; the idle readers of its connections share one poller.
type Upgrader struct {
	poller *idlePoller
	stall  time.Duration
}

// NewUpgrader returns an Upgrader with o.
func NewUpgrader(o *Options) *Upgrader {
	u := &Upgrader{poller: newIdlePoller(), stall: defaultFlushStall}
	if o != nil && o.FlushStall > 0 {
		u.stall = o.FlushStall
	}
	return u
}

// Accept is websocket.Accept with o, on a connection with small buffers,
// batched writes that do not wait for the peer, and a reader that parks
// between messages. The Transport carries nothing until Attach.
func (u *Upgrader) Accept(w http.ResponseWriter, r *http.Request, o *websocket.AcceptOptions) (*websocket.Conn, *Transport, error) {
	hw := &hijacker{ResponseWriter: w, u: u}
	ws, err := websocket.Accept(hw, r, o)
	if err != nil {
		return nil, nil, err
	}
	t := hw.t
	t.ws = ws
	// The library reads through Hijack's reader, which it has pointed at a reader of the bytes
	// it found buffered there (none: Hijack moved them into the corkConn) and then the socket.
	// Pointed back at the socket, the reader holds nothing more for the life of the connection.
	if t.br.Buffered() == 0 {
		t.br.Reset(t.cork)
	}
	return ws, t, nil
}

// Buffer sizes on a hijacked connection. net/http hands a hijacked
// connection 4 KiB read and write buffers, 8 KiB an idle connection holds
// for nothing. The WebSocket library's buffers here are the smallest bufio
// allows: reads go through corkConn's pooled buffer, held only while it
// has unread bytes, and the writer's frames are gathered by corkConn
// (library_test.go holds the library to the way this relies on them).
const (
	leanReadBuffer  = 16
	leanWriteBuffer = 16
	readChunk       = 4 << 10 // corkConn's pooled read buffer
)

// hijacker wraps the upgrade's ResponseWriter so that the WebSocket
// library gets a corkable connection with small buffers when it hijacks.
type hijacker struct {
	http.ResponseWriter
	u *Upgrader
	t *Transport // made by Hijack
}

var _ http.Hijacker = (*hijacker)(nil)

func (w *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("wsnet: the response writer cannot be hijacked")
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	cork := newCorkConn(c, w.u.stall)
	// Bytes net/http has already read must stay readable: they go first
	// into the connection's read buffer, where Park sees them. A client
	// may send them before the 101 or, as the WebSocket library writes the
	// 101 before it hijacks, right after it while net/http still reads.
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ := brw.Reader.Peek(n)
		cork.unread(early)
	}
	br := bufio.NewReaderSize(cork, leanReadBuffer)
	w.t = &Transport{cork: cork, br: br, pc: w.u.poller.conn(cork.raw)}
	return cork, bufio.NewReadWriter(br, bufio.NewWriterSize(cork, leanWriteBuffer)), nil
}
