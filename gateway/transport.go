package gateway

import (
	"bufio"
	"context"
	"errors"
	"sync"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/rpc"
)

// errWrongFrameKind ends a session whose client sent a frame of the other codec's kind.
var errWrongFrameKind = errors.New("gateway: frame kind does not match the subprotocol")

// errInvalidUTF8 ends a session whose client sent a text frame that is not
// UTF-8: RFC 6455 §8.1 fails such a connection with 1007.
var errInvalidUTF8 = errors.New("gateway: text frame is not valid UTF-8")

// wsTransport carries one JSON-RPC message per WebSocket frame.
type wsTransport struct {
	ws   *websocket.Conn
	typ  websocket.MessageType
	cork *corkConn // the hijacked connection, for batched writes
	sess *session  // told when a frame of the wrong kind arrives

	// Parking between messages (nil pc: never). The WebSocket library's
	// reader br and cork's read buffer are looked at only by the reader,
	// and never once closing is set: the library's close handshake reads
	// them on another goroutine.
	pc      *pollConn
	br      *bufio.Reader
	mu      sync.Mutex
	closing bool
}

var (
	_ rpc.Transport = (*wsTransport)(nil)
	_ rpc.Batcher   = (*wsTransport)(nil)
	_ rpc.Parker    = (*wsTransport)(nil)
)

// Park waits for the next message without a goroutine when nothing is
// buffered: resume runs once the socket is readable or the session closes.
func (t *wsTransport) Park(resume func()) bool {
	if t.pc == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing || t.br.Buffered() > 0 || t.cork.readPending() {
		return false
	}
	return t.pc.park(resume)
}

// beginClose stops parking and resumes a parked reader, before anything
// closes the WebSocket.
func (t *wsTransport) beginClose() {
	if t.pc == nil {
		return
	}
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
	t.pc.close()
}

// Close ends the connection as the rpc.Conn ends. Usually the close
// handshake has happened already and this returns at once. When the
// WebSocket library has sent a close frame itself (a frame over the read
// limit: 1009), it waits for the peer's close so that the peer reads that
// code rather than a reset.
func (t *wsTransport) Close() error {
	t.beginClose()
	t.cork.closeWithin(closeGrace)
	// The session's code when it chose one (a frame refused at its header: 1009, 1002).
	code, reason := t.sess.chosenClose()
	if code == 0 {
		code, reason = websocket.StatusGoingAway, ""
	}
	return t.ws.Close(code, reason)
}

// Cork gathers the frames written until Uncork into one write.
func (t *wsTransport) Cork() { t.cork.Cork() }

// Uncork writes the gathered frames and waits until the peer has taken
// them (a slow peer holds up only its own writer). Bytes a TryWrite left
// to the flusher are sent first, so that no more than one batch or one
// TryWrite is ever held for a slow peer.
func (t *wsTransport) Uncork() error {
	werr := t.cork.wait()
	if err := t.cork.Uncork(); err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	return t.cork.wait()
}

// Read ignores ctx: a cancellable context costs the WebSocket library a
// registration per read. The rpc.Conn closes the transport as it ends,
// which ends a pending read (io.Closer).
func (t *wsTransport) Read(_ context.Context) ([]byte, error) {
	typ, data, err := t.ws.Read(context.Background())
	if err != nil {
		return nil, err
	}
	if typ != t.typ {
		t.sess.wrongKind()
		// Close here, before the read's context ends the connection abruptly.
		t.cork.closeWithin(closeGrace)
		_ = t.ws.Close(websocket.StatusUnsupportedData, "frame kind does not match the subprotocol")
		return nil, errWrongFrameKind
	}
	if typ == websocket.MessageText && !utf8.Valid(data) {
		const reason = "text frame is not valid UTF-8"
		t.sess.closeWith(websocket.StatusInvalidFramePayloadData, reason)
		t.cork.closeWithin(closeGrace)
		_ = t.ws.Close(websocket.StatusInvalidFramePayloadData, reason)
		return nil, errInvalidUTF8
	}
	return data, nil
}

// Write ignores ctx for the same reason as Read: with a cancellable
// context the WebSocket library registers (and removes) a callback on it
// for every frame. Closing the transport ends a pending write.
func (t *wsTransport) Write(_ context.Context, frame []byte) error {
	return t.ws.Write(context.Background(), t.typ, frame)
}
