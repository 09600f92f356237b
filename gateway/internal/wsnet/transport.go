package wsnet

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/rpc"
)

// CloseGrace bounds a close handshake: once the server has sent its close frame, the peer has
// this long to answer it before the socket is closed, whatever it is sending.
const CloseGrace = 2 * time.Second

// errWrongFrameKind ends a connection whose peer sent a frame of the other kind.
var errWrongFrameKind = errors.New("wsnet: frame kind does not match the subprotocol")

// errInvalidUTF8 ends a connection whose peer sent a text frame that is not
// UTF-8: RFC 6455 §8.1 fails such a connection with 1007.
var errInvalidUTF8 = errors.New("wsnet: text frame is not valid UTF-8")

// Owner is the session a Transport carries.
type Owner interface {
	// CloseWith is told the close code the connection chose: a frame refused at its header
	// (1009, 1002), a frame of the wrong kind (1003), a text frame that is not UTF-8 (1007).
	CloseWith(code websocket.StatusCode, reason string)
	// CloseCode is the close code and reason the session chose, 0 when none was.
	CloseCode() (websocket.StatusCode, string)
}

// Transport carries one JSON-RPC message per WebSocket frame, over a
// connection that Upgrader.Accept made.
type Transport struct {
	ws    *websocket.Conn
	cork  *corkConn // the hijacked connection, for batched writes
	owner Owner     // told when the connection chooses a close code; set by Attach

	// Parking between messages (never when pc is not pollable). The
	// WebSocket library's reader br and cork's read buffer are looked at
	// only by the reader, and never once closing is set: the library's
	// close handshake reads them on another goroutine. pc is part of the
	// Transport rather than an allocation of its own.
	pc      pollConn
	br      *bufio.Reader
	mu      sync.Mutex
	closing bool
	binary  bool // binary frames, else text
}

var (
	_ rpc.Transport = (*Transport)(nil)
	_ rpc.Batcher   = (*Transport)(nil)
	_ rpc.Parker    = (*Transport)(nil)
)

// Attach makes t carry owner's messages, in binary frames or text frames,
// none longer than readLimit bytes. It is called once, before anything
// reads.
func (t *Transport) Attach(owner Owner, binary bool, readLimit int64) {
	t.owner, t.binary = owner, binary
	t.ws.SetReadLimit(readLimit)
	t.cork.guard = &frameGuard{limit: readLimit}
}

func (t *Transport) typ() websocket.MessageType {
	if t.binary {
		return websocket.MessageBinary
	}
	return websocket.MessageText
}

// opcode is the opcode of t's data frames.
func (t *Transport) opcode() byte {
	if t.binary {
		return opBinary
	}
	return opText
}

// Park waits for the next message without a goroutine when nothing is
// buffered: resume runs once the socket is readable or the session closes.
func (t *Transport) Park(resume func()) bool {
	if !t.pc.pollable() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing || t.br.Buffered() > 0 || t.cork.readPending() {
		return false
	}
	return t.pc.park(resume)
}

// BeginClose stops parking and resumes a parked reader, before anything
// closes the WebSocket.
func (t *Transport) BeginClose() {
	if !t.pc.pollable() {
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
func (t *Transport) Close() error {
	t.BeginClose()
	t.cork.closeWithin(CloseGrace)
	// The session's code when it chose one (a frame refused at its header: 1009, 1002).
	code, reason := t.owner.CloseCode()
	if code == 0 {
		code, reason = websocket.StatusGoingAway, ""
	}
	return t.ws.Close(code, reason)
}

// Abort closes the socket now, under whatever the WebSocket library is
// doing (a close handshake waits for the peer).
func (t *Transport) Abort() {
	t.BeginClose()
	_ = t.cork.Close()
}

// CloseWithin closes the socket d from now, whatever is reading or writing
// it then: the bound of a close handshake (and of what is flushed before
// it) with a peer that does not answer. The earliest of several bounds
// holds; a socket closed before then is not held until it passes.
func (t *Transport) CloseWithin(d time.Duration) { t.cork.closeWithin(d) }

// WebSocket is the connection t carries messages over.
func (t *Transport) WebSocket() *websocket.Conn { return t.ws }

// RemoteAddr is the peer's address.
func (t *Transport) RemoteAddr() net.Addr { return t.cork.RemoteAddr() }

// Cork gathers the frames written until Uncork into one write.
func (t *Transport) Cork() { t.cork.Cork() }

// Uncork writes the gathered frames and waits until the peer has taken
// them (a slow peer holds up only its own writer). Bytes a TryWrite left
// to the flusher are sent first, so that no more than one batch or one
// TryWrite is ever held for a slow peer.
func (t *Transport) Uncork() error {
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
func (t *Transport) Read(_ context.Context) ([]byte, error) {
	typ, data, err := t.ws.Read(context.Background())
	if err != nil {
		if code, reason := t.cork.guard.refusal(); code != 0 {
			t.owner.CloseWith(code, reason)
		}
		return nil, err
	}
	if typ != t.typ() {
		return nil, t.refuse(websocket.StatusUnsupportedData, "frame kind does not match the subprotocol", errWrongFrameKind)
	}
	if typ == websocket.MessageText && !utf8.Valid(data) {
		return nil, t.refuse(websocket.StatusInvalidFramePayloadData, "text frame is not valid UTF-8", errInvalidUTF8)
	}
	return data, nil
}

// refuse ends the connection with code for a message Read refuses, and returns err.
func (t *Transport) refuse(code websocket.StatusCode, reason string, err error) error {
	t.owner.CloseWith(code, reason)
	// Close here, before the read's context ends the connection abruptly.
	t.cork.closeWithin(CloseGrace)
	_ = t.ws.Close(code, reason)
	return err
}

// Write builds the frame itself (see frames.go) unless the WebSocket library
// is writing a frame of its own or has closed; then the library writes it.
// It ignores ctx for the same reason as Read: with a cancellable context the
// library registers (and removes) a callback on it for every frame. Closing
// the transport ends a pending write.
func (t *Transport) Write(_ context.Context, frame []byte) error {
	if ok, err := t.cork.writeFrame(t.opcode(), frame); ok {
		return err
	}
	return t.ws.Write(context.Background(), t.typ(), frame)
}

// Status is the close code of a connection whose reads ended with err: the
// peer's, or the one Read closed with (a frame of the wrong kind, a text
// frame that is not UTF-8), else 1006.
func Status(err error) websocket.StatusCode {
	if code := websocket.CloseStatus(err); code != -1 {
		return code
	}
	switch {
	case errors.Is(err, errWrongFrameKind):
		return websocket.StatusUnsupportedData
	case errors.Is(err, errInvalidUTF8):
		return websocket.StatusInvalidFramePayloadData
	}
	return websocket.StatusAbnormalClosure
}
