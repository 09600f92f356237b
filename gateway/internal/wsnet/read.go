package wsnet

import (
	"context"
	"errors"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/gateway/internal/wsframe"
)

// Reading the peer's frames (RFC 6455 §5): a message is returned whole; pings are answered
// between its frames, and a close frame ends the reading. A frame is refused at its header
// where the header is enough to refuse it, before its payload is read: a message over the
// read limit closes 1009 at once, a frame that is not masked, with reserved bits, of an
// unknown opcode or out of order 1002, a data frame of the other kind than the subprotocol's
// 1003. Text that is not UTF-8 closes 1007 at the fragment that carries it. A payload's
// memory is taken as its bytes arrive (payload.go), from a budget of all the Upgrader's
// connections: one whose next piece it has no room for closes 1013. The bytes, headers and
// payloads come from the Transport's reader (reader.go, payload.go); what Read answers (pongs,
// the close frame) goes out through its writer.

// refusal is the error of a connection whose reading ended with a frame Read refused, and
// the close code it chose.
type refusal struct {
	code   websocket.StatusCode
	reason string
}

func (r *refusal) Error() string { return "wsnet: " + r.reason }

// unmaskedReason is the reason of the close (1002) of a connection whose peer sent a frame
// that is not masked: a client's always is, so it is refused at its first two bytes.
const unmaskedReason = "client frames must be masked"

// Read returns the next message. ctx is not used: the rpc.Conn closes the transport as it
// ends, which ends a pending read (io.Closer).
func (t *Transport) Read(context.Context) ([]byte, error) {
	if t.w.stream != nil {
		return t.readStream()
	}
	t.r.mu.Lock()
	msg, err := t.readMessage()
	if err != nil && t.r.err == nil {
		t.r.err = err // the stream is not read past a failure
	}
	t.r.done()
	t.r.mu.Unlock()
	t.readerLeft()
	return msg, err
}

// readMessage reads frames up to the end of a data message. Every frame but a ping (which
// Pinged charges) and a message's last frame (the message, which its owner charges as it
// reads it) is told to the Owner (Framed) as its header is read. Text is checked to be UTF-8
// fragment by fragment, a character split between two fragments left to the next.
func (t *Transport) readMessage() ([]byte, error) {
	var held int64 // the message's capacity counted in the budget while it is not whole
	msg, err := t.readFrames(&held)
	if held > 0 {
		t.r.partial.give(held)
	}
	return msg, err
}

// readFrames is readMessage, counting in *held the message's capacity in the budget while it
// is not whole (reader.payload).
func (t *Transport) readFrames(held *int64) ([]byte, error) {
	if t.r.err != nil {
		return nil, t.r.err
	}
	if err := t.peerClosed(); err != nil {
		return nil, err
	}
	limit := t.r.limit
	if !t.r.readOne && t.r.first > 0 {
		limit = min(limit, t.r.first)
	}
	var msg []byte
	var op wsframe.Opcode // the message's opcode, once its first frame is read
	valid := 0            // of a text message, the bytes checked to be whole characters
	for {
		h, err := t.r.header()
		if err == nil && !h.Masked {
			err = t.refuseHeader(websocket.StatusProtocolError, unmaskedReason)
		}
		if err != nil {
			return nil, err
		}
		if h.Rsv != 0 {
			return nil, t.refuseHeader(websocket.StatusProtocolError, "reserved bits set, and no extension was negotiated")
		}
		switch h.Op {
		case wsframe.OpPing, wsframe.OpPong, wsframe.OpClose:
			if err := t.readControl(h); err != nil {
				return nil, err
			}
			continue
		case wsframe.OpContinuation:
			if op == 0 {
				return nil, t.refuseHeader(websocket.StatusProtocolError, "continuation frame without a message to continue")
			}
		case wsframe.OpText, wsframe.OpBinary:
			if op != 0 {
				return nil, t.refuseHeader(websocket.StatusProtocolError, "new message before the last one ended")
			}
		default:
			return nil, t.refuseHeader(websocket.StatusProtocolError, "unknown opcode")
		}
		if h.Length < 0 || h.Length > limit-int64(len(msg)) {
			return nil, t.refuseHeader(websocket.StatusMessageTooBig, "message too big")
		}
		if op == 0 {
			if h.Op != t.opcode() {
				return nil, t.refuseHeader(websocket.StatusUnsupportedData, "frame kind does not match the subprotocol")
			}
			op = h.Op
		}
		if !h.Fin && t.owner != nil {
			t.owner.Framed()
		}
		if msg, err = t.r.payload(msg, int(h.Length), h.Mask, h.Fin, held); err != nil {
			if err == errNoRoom {
				return nil, t.refusePartial()
			}
			return nil, err
		}
		if op == wsframe.OpText {
			k, ok := utf8Prefix(msg[valid:])
			if valid += k; !ok || (h.Fin && valid != len(msg)) {
				return nil, t.refuse(websocket.StatusInvalidFramePayloadData, "text frame is not valid UTF-8")
			}
		}
		if h.Fin {
			t.r.readOne = true
			return msg, nil
		}
	}
}

// pingBound bounds the OnPing callback of one ping.
const pingBound = 5 * time.Second

// readControl reads and acts on a control frame: a ping is answered (when Pinged lets it),
// a pong only charged (Framed: the server sends no pings), and a close frame, charged too,
// ends the reading.
func (t *Transport) readControl(h wsframe.Header) error {
	if !h.Fin || h.Length < 0 || h.Length > wsframe.MaxControlPayload {
		return t.refuseHeader(websocket.StatusProtocolError, "control frame fragmented or over 125 bytes")
	}
	var buf [wsframe.MaxControlPayload]byte
	p := buf[:h.Length]
	if err := t.r.readFull(p); err != nil {
		return err
	}
	wsframe.Mask(p, h.Mask)
	switch h.Op {
	case wsframe.OpPing:
		if t.closeSent() {
			return nil
		}
		if t.owner != nil {
			ctx, cancel := context.WithTimeout(context.Background(), pingBound)
			ok := t.owner.Pinged(ctx, p)
			cancel()
			if !ok {
				return nil
			}
		}
		if err := t.w.writeControl(wsframe.OpPong, p); err != nil && !errors.Is(err, errClosedFrame) {
			return err
		}
		return nil
	case wsframe.OpPong:
		if t.owner != nil {
			t.owner.Framed()
		}
		return nil
	}
	if t.owner != nil {
		t.owner.Framed()
	}
	code, reason, err := wsframe.ParseClose(p)
	switch {
	case errors.Is(err, wsframe.ErrCloseReason):
		return t.refuse(websocket.StatusInvalidFramePayloadData, err.Error())
	case err != nil:
		return t.refuse(websocket.StatusProtocolError, err.Error())
	}
	return t.peerClose(websocket.CloseError{Code: websocket.StatusCode(code), Reason: reason})
}

// refuseHeader refuses a frame at its header: the frame's payload is not read, so nothing
// after it can be, and once the close frame has gone the socket is shut for writing and
// what the peer still sends is dropped until it is closed (writer.Close).
func (t *Transport) refuseHeader(code websocket.StatusCode, reason string) error {
	t.w.drain.Store(true)
	return t.refuse(code, reason)
}

// refuse ends the reading with code: the Owner is told, and the close frame is sent now.
func (t *Transport) refuse(code websocket.StatusCode, reason string) error {
	if t.owner != nil {
		t.owner.CloseWith(code, reason)
	}
	t.w.closeWithin(CloseGrace)
	t.sendClose(code, reason)
	return &refusal{code: code, reason: reason}
}
