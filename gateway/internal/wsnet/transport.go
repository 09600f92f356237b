package wsnet

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/gateway/internal/poller"
	"github.com/ballet/gateway/gateway/internal/wsframe"
	"github.com/ballet/gateway/rpc"
)

// Owner is the session a Transport carries.
type Owner interface {
	// CloseWith is told the close code the connection chose: a frame refused (1009, 1002,
	// 1003), a text frame that is not UTF-8 (1007).
	CloseWith(code websocket.StatusCode, reason string)
	// CloseCode is the close code and reason the session chose, 0 when none was.
	CloseCode() (websocket.StatusCode, string)
	// Pinged runs as a ping arrives, on the reader's goroutine, and reports whether it gets
	// its pong; ctx bounds the call (5 s).
	Pinged(ctx context.Context, payload []byte) bool
	// Framed runs, on the reader's goroutine, as a frame arrives that is neither a ping nor
	// the last frame of a message (the message, which the owner charges as it reads it): a
	// pong, a close frame, a fragment of a message before its last. The owner charges it to
	// a budget and closes the connection past it, and may hold the reader meanwhile, so that
	// a flood of frames that ask for nothing costs no more than one that does.
	Framed()
}

// Transport carries one JSON-RPC message per WebSocket frame, over a connection that
// Upgrader.Accept made. It composes the connection's read side, its reader (reader.go,
// payload.go), whose frames it makes messages of (read.go), and its write side, its writer
// (write.go, send.go, frames.go, direct.go), and runs the closing handshake over both
// (close.go).
type Transport struct {
	w     *writer // the write side, and the hijacked socket
	r     reader  // the read side
	owner Owner   // told when the connection chooses a close code; set by Attach
	sub   string  // the subprotocol chosen, as the server spells it

	// Parking between messages (never when pc is not pollable). The reader's buffer is
	// looked at only by the reader, and never once closing is set: a close handshake may
	// read it on another goroutine. pc is part of the Transport rather than an allocation of
	// its own.
	pc poller.Conn
	mu sync.Mutex // guards closing and cs
	// binary and fd, set before anything reads or writes, sit beside closing: together they
	// take one word of the Transport.
	binary  bool // binary frames, else text
	fd      bool // the socket is served by its descriptor (poller.Own)
	closing bool
	cs      closeState
}

// setConn makes c t's socket: its writer's, whose flusher waits stall at most for the peer to
// take each chunk (Options.FlushStall), and its reader's, which counts the payloads not yet
// whole in partial.
func (t *Transport) setConn(c net.Conn, stall time.Duration, partial *partialBudget) {
	t.w = newWriter(c, stall)
	t.r.src, t.r.partial = c, partial
}

var (
	_ rpc.Transport = (*Transport)(nil)
	_ rpc.Batcher   = (*Transport)(nil)
	_ rpc.Parker    = (*Transport)(nil)

	_ rpc.FramesWriter = (*Transport)(nil)
)

// Attach makes t carry owner's messages, in binary frames or text frames,
// none longer than readLimit bytes. It is called once, before anything
// reads.
func (t *Transport) Attach(owner Owner, binary bool, readLimit int64) {
	t.owner, t.binary, t.r.limit = owner, binary, readLimit
}

// LimitFirst makes n bytes the longest first message t reads, when that is shorter than the
// read limit: a session whose first message must be a short one (an auth request) holds no
// more for a peer that has not authenticated. It is called once, before anything reads.
func (t *Transport) LimitFirst(n int64) { t.r.first = n }

// Subprotocol is the subprotocol the handshake chose, "" for none.
func (t *Transport) Subprotocol() string { return t.sub }

// opcode is the opcode of t's data frames.
func (t *Transport) opcode() wsframe.Opcode {
	if t.binary {
		return wsframe.OpBinary
	}
	return wsframe.OpText
}

// Park waits for the next message without a goroutine when nothing is
// buffered: resume runs once the socket is readable or the session closes.
func (t *Transport) Park(resume func()) bool {
	if !t.pc.Pollable() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing || t.r.pending() || (t.w.stream != nil && t.w.stream.first != nil) {
		return false
	}
	return t.pc.Park(resume)
}

// BeginClose stops parking and resumes a parked reader, before anything
// closes the socket. A socket served by its descriptor goes on waiting on
// the poller, for the close handshake, until it is closed; another is
// unregistered now.
func (t *Transport) BeginClose() {
	if !t.pc.Pollable() {
		return
	}
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
	if t.fd {
		t.pc.StopParking()
	} else {
		t.pc.Close()
	}
}

// RemoteAddr is the peer's address.
func (t *Transport) RemoteAddr() net.Addr { return t.w.RemoteAddr() }

// Cork gathers the frames written until Uncork into one write.
func (t *Transport) Cork() { t.w.Cork() }

// Uncork writes the gathered frames and waits until the peer has taken
// them (a slow peer holds up only its own writer). Bytes a TryWrite left
// to the flusher are sent first, so that no more than one batch or one
// TryWrite is ever held for a slow peer.
func (t *Transport) Uncork() error {
	werr := t.w.wait()
	if err := t.w.Uncork(); err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	return t.w.wait()
}

// Write writes one data frame (see frames.go), or gathers it while corked. It ignores ctx:
// it never waits for the peer (Uncork does), and closing the transport ends the wait.
func (t *Transport) Write(_ context.Context, frame []byte) error {
	return t.w.writeFrame(t.framing(), frame)
}

// WriteFrames sends frames in vectored writes, their bodies where they are, after the bytes a
// TryWrite left, as much as the socket takes now; the caller's Drain sends the rest on its
// goroutine.
func (t *Transport) WriteFrames(frames []rpc.Out) error {
	return t.w.writeFrames(t.framing(), frames)
}

// Busy reports whether bytes a TryWrite or a WriteFrames left for later are unsent.
func (t *Transport) Busy() bool { return t.w.backlog() > 0 }

// Drain returns once the bytes a TryWrite or a WriteFrames left are sent: those of a
// WriteFrames on the caller's goroutine, those of a TryWrite by the connection's flusher.
func (t *Transport) Drain() error { return t.w.wait() }
