package wsnet

import (
	"errors"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/gateway/internal/wsframe"
)

// The closing handshake (RFC 6455 §7): each side sends one close frame and the server closes
// the TCP connection once it has both sent and read one, or CloseGrace after it sent its own
// when the peer does not answer. A close begun by the peer is answered with its own code and
// reason as the reader reads it; one begun here waits for the peer's answer, which the reader
// reads when there is one and Close reads itself when there is none.

// CloseGrace bounds a close handshake: once the server has sent its close frame, the peer has
// this long to answer it before the socket is closed, whatever it is sending.
const CloseGrace = 2 * time.Second

// closeState is a Transport's part of the closing handshake, guarded by its mu.
type closeState struct {
	sent     bool                  // our close frame is written
	peer     *websocket.CloseError // the peer's close frame, once read
	readWait chan struct{}         // closed as the reader leaves Read; made by a waiting Close
	done     bool                  // CloseHandshake has run
}

// sendClose writes the close frame of code and reason unless one was written; it reports
// whether it wrote it. A code that may not be sent (1005, 1006) sends an empty one, and a
// reason is cut to what a control frame holds, at a character's end.
func (t *Transport) sendClose(code websocket.StatusCode, reason string) bool {
	t.mu.Lock()
	if t.cs.sent {
		t.mu.Unlock()
		return false
	}
	t.cs.sent = true
	t.mu.Unlock()
	_ = t.w.writeControl(wsframe.OpClose, wsframe.ClosePayload(int(code), reason))
	return true
}

// closeSent reports whether our close frame is written.
func (t *Transport) closeSent() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cs.sent
}

// peerClosed is the peer's close, once its close frame was read, else nil.
func (t *Transport) peerClosed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cs.peer != nil {
		return *t.cs.peer
	}
	return nil
}

// peerClose records the peer's close frame ce and returns it as the reading's error. When
// the peer began the handshake, its code and reason are echoed and the socket closed once
// the echo has gone (or CloseGrace has passed).
func (t *Transport) peerClose(ce websocket.CloseError) error {
	t.mu.Lock()
	t.cs.peer = &ce
	t.mu.Unlock()
	if t.sendClose(ce.Code, ce.Reason) {
		t.w.closeWithin(CloseGrace)
		_ = t.w.wait()
		t.BeginClose()
		_ = t.w.Close()
	}
	return ce
}

// readerLeft wakes a Close that waits for the reader to leave Read.
func (t *Transport) readerLeft() {
	t.mu.Lock()
	if ch := t.cs.readWait; ch != nil {
		close(ch)
		t.cs.readWait = nil
	}
	t.mu.Unlock()
}

// CloseHandshake closes the connection with code and reason: it sends the close frame
// (unless one was sent) and closes the socket once the peer's close frame is read or
// CloseGrace has passed (or the bound CloseWithin set, when it did), and returns then. A later call returns at once, leaving the socket
// to the first.
func (t *Transport) CloseHandshake(code websocket.StatusCode, reason string) error {
	t.BeginClose()
	t.mu.Lock()
	again := t.cs.done
	t.cs.done = true
	t.mu.Unlock()
	if again {
		return nil
	}
	t.w.boundClose(CloseGrace)
	if t.w.stream != nil {
		return t.endStream(code, reason)
	}
	t.sendClose(code, reason)
	if !t.w.drain.Load() { // else the peer's frames can no longer be read
		t.awaitPeerClose(time.Now().Add(CloseGrace))
	}
	return t.w.Close()
}

// awaitPeerClose waits until the peer's close frame is read, by the reader when it reads and
// else here, or the socket fails, or deadline.
func (t *Transport) awaitPeerClose(deadline time.Time) {
	for {
		if t.r.mu.TryLock() {
			t.discardUntilClose()
			t.r.done()
			t.r.mu.Unlock()
			return
		}
		t.mu.Lock()
		if t.cs.peer != nil {
			t.mu.Unlock()
			return
		}
		if t.cs.readWait == nil {
			t.cs.readWait = make(chan struct{})
		}
		ch := t.cs.readWait
		t.mu.Unlock()
		if t.r.mu.TryLock() { // the reader left before it could see ch
			t.r.mu.Unlock()
			continue
		}
		d := time.Until(deadline)
		if d <= 0 {
			return
		}
		timer := time.NewTimer(d)
		select {
		case <-ch:
			timer.Stop()
		case <-timer.C:
			return
		}
	}
}

// discardUntilClose reads and drops the peer's frames up to its close frame (or the
// socket's end, CloseGrace at most after our close frame). It holds the read lock.
func (t *Transport) discardUntilClose() {
	for t.r.err == nil && t.peerClosed() == nil {
		h, err := t.r.header()
		if err == nil && !h.Masked {
			err = t.refuseHeader(websocket.StatusProtocolError, unmaskedReason)
		}
		if err != nil || h.Length < 0 {
			return
		}
		if h.Op < wsframe.OpClose {
			if t.r.skip(h.Length) != nil {
				return
			}
			continue
		}
		if err := t.readControl(h); err != nil {
			return
		}
	}
}

// CloseNow closes the socket with no close frame (the peer's close was read, or the
// connection failed).
func (t *Transport) CloseNow() error {
	t.BeginClose()
	return t.w.Close()
}

// Close ends the connection as the rpc.Conn ends, with the Owner's code or else 1001.
// Usually the close handshake has happened already and this returns at once.
func (t *Transport) Close() error {
	code, reason := websocket.StatusCode(0), ""
	if t.owner != nil {
		code, reason = t.owner.CloseCode()
	}
	if code == 0 {
		code, reason = websocket.StatusGoingAway, ""
	}
	return t.CloseHandshake(code, reason)
}

// Abort closes the socket now, whatever the connection is doing (a close handshake waits for
// the peer).
func (t *Transport) Abort() {
	t.BeginClose()
	_ = t.w.Close()
}

// CloseWithin closes the socket d from now, whatever is reading or writing it then: the
// bound of a close handshake (and of what is flushed before it) with a peer that does not
// answer. The earliest of several bounds holds; a socket closed before then is not held
// until it passes.
func (t *Transport) CloseWithin(d time.Duration) { t.w.closeWithin(d) }

// Status is the close code of a connection whose reading ended with err: the peer's, or the
// one the reading chose (a frame refused), else 1006.
func Status(err error) websocket.StatusCode {
	if code := websocket.CloseStatus(err); code != -1 {
		return code
	}
	var r *refusal
	if errors.As(err, &r) {
		return r.code
	}
	return websocket.StatusAbnormalClosure
}
