package wsnet

import (
	"context"
	"encoding/binary"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// Reading the peer's frames (RFC 6455 §5): a message is returned whole; pings are answered
// between its frames, and a close frame ends the reading. A frame is refused at its header
// where the header is enough to refuse it, before its payload is read: a message over the
// read limit closes 1009 at once, a frame that is not masked, with reserved bits, of an
// unknown opcode or out of order 1002, a data frame of the other kind than the subprotocol's
// 1003. Text that is not UTF-8 closes 1007 at the fragment that carries it. A payload's
// memory is taken as its bytes arrive (payload.go), from a budget of all the Upgrader's
// connections: one whose next piece it has no room for closes 1013.

// refusal is the error of a connection whose reading ended with a frame Read refused, and
// the close code it chose.
type refusal struct {
	code   websocket.StatusCode
	reason string
}

func (r *refusal) Error() string { return "wsnet: " + r.reason }

// frameHead is one frame's header.
type frameHead struct {
	fin bool
	rsv byte // the three reserved bits
	op  byte
	n   int64 // payload length; a length past 2^63 reads as negative
	key [4]byte
}

// readHead reads the next frame header. A frame from a client is always masked: an unmasked
// one is refused here.
func (t *Transport) readHead() (frameHead, error) {
	p, err := t.cork.next(2)
	if err != nil {
		return frameHead{}, err
	}
	b0, b1 := p[0], p[1]
	if b1&0x80 == 0 {
		return frameHead{}, t.refuseHeader(websocket.StatusProtocolError, "client frames must be masked")
	}
	size := int(headerSize(b1))
	p, err = t.cork.next(size - 2 + 4)
	if err != nil {
		return frameHead{}, err
	}
	h := frameHead{fin: b0&0x80 != 0, rsv: b0 & 0x70, op: b0 & 0x0f}
	var hdr [10]byte
	hdr[1] = b1
	copy(hdr[2:], p[:size-2])
	h.n = int64(payloadLen(hdr[:size]))
	copy(h.key[:], p[size-2:])
	return h, nil
}

// Read returns the next message. ctx is not used: the rpc.Conn closes the transport as it
// ends, which ends a pending read (io.Closer).
func (t *Transport) Read(context.Context) ([]byte, error) {
	t.readMu.Lock()
	msg, err := t.readMessage()
	if err != nil && t.rerr == nil {
		t.rerr = err // the stream is not read past a failure
	}
	t.cork.doneReading()
	t.readMu.Unlock()
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
		t.partial.give(held)
	}
	return msg, err
}

// readFrames is readMessage, counting in *held the message's capacity in the budget while it
// is not whole (readPayload).
func (t *Transport) readFrames(held *int64) ([]byte, error) {
	if t.rerr != nil {
		return nil, t.rerr
	}
	if err := t.peerClosed(); err != nil {
		return nil, err
	}
	limit := t.limit
	if !t.readOne && t.first > 0 {
		limit = min(limit, t.first)
	}
	var msg []byte
	var op byte // the message's opcode, once its first frame is read
	valid := 0  // of a text message, the bytes checked to be whole characters
	for {
		h, err := t.readHead()
		if err != nil {
			return nil, err
		}
		if h.rsv != 0 {
			return nil, t.refuseHeader(websocket.StatusProtocolError, "reserved bits set, and no extension was negotiated")
		}
		switch h.op {
		case opPing, opPong, opClose:
			if err := t.readControl(h); err != nil {
				return nil, err
			}
			continue
		case opContinuation:
			if op == 0 {
				return nil, t.refuseHeader(websocket.StatusProtocolError, "continuation frame without a message to continue")
			}
		case opText, opBinary:
			if op != 0 {
				return nil, t.refuseHeader(websocket.StatusProtocolError, "new message before the last one ended")
			}
		default:
			return nil, t.refuseHeader(websocket.StatusProtocolError, "unknown opcode")
		}
		if h.n < 0 || h.n > limit-int64(len(msg)) {
			return nil, t.refuseHeader(websocket.StatusMessageTooBig, "message too big")
		}
		if op == 0 {
			if h.op != t.opcode() {
				return nil, t.refuseHeader(websocket.StatusUnsupportedData, "frame kind does not match the subprotocol")
			}
			op = h.op
		}
		if !h.fin && t.owner != nil {
			t.owner.Framed()
		}
		if msg, err = t.readPayload(msg, int(h.n), h.key, h.fin, held); err != nil {
			return nil, err
		}
		if op == opText {
			k, ok := utf8Prefix(msg[valid:])
			if valid += k; !ok || (h.fin && valid != len(msg)) {
				return nil, t.refuse(websocket.StatusInvalidFramePayloadData, "text frame is not valid UTF-8")
			}
		}
		if h.fin {
			t.readOne = true
			return msg, nil
		}
	}
}

// unmask unmasks a whole payload p with key (RFC 6455 §5.3), eight bytes at a time.
func unmask(p []byte, key [4]byte) {
	if len(p) >= 8 {
		k := uint64(binary.LittleEndian.Uint32(key[:]))
		k |= k << 32
		for len(p) >= 8 {
			binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)^k)
			p = p[8:]
		}
	}
	for i := range p {
		p[i] ^= key[i&3]
	}
}

// pingBound bounds the OnPing callback of one ping.
const pingBound = 5 * time.Second

// readControl reads and acts on a control frame: a ping is answered (when Pinged lets it),
// a pong only charged (Framed: the server sends no pings), and a close frame, charged too,
// ends the reading.
func (t *Transport) readControl(h frameHead) error {
	if !h.fin || h.n < 0 || h.n > maxControl {
		return t.refuseHeader(websocket.StatusProtocolError, "control frame fragmented or over 125 bytes")
	}
	var buf [maxControl]byte
	p := buf[:h.n]
	if err := t.cork.readFull(p); err != nil {
		return err
	}
	unmask(p, h.key)
	switch h.op {
	case opPing:
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
		if err := t.cork.writeControl(opPong, p); err != nil && !errors.Is(err, errClosedFrame) {
			return err
		}
		return nil
	case opPong:
		if t.owner != nil {
			t.owner.Framed()
		}
		return nil
	}
	if t.owner != nil {
		t.owner.Framed()
	}
	ce, err := parseClose(p)
	switch {
	case errors.Is(err, errCloseReason):
		return t.refuse(websocket.StatusInvalidFramePayloadData, err.Error())
	case err != nil:
		return t.refuse(websocket.StatusProtocolError, err.Error())
	}
	return t.peerClose(ce)
}

// maxControl is the longest control frame's payload (RFC 6455 §5.5).
const maxControl = 125

// parseClose is the close code and reason of a close frame's payload p: 1005 for none.
func parseClose(p []byte) (websocket.CloseError, error) {
	switch {
	case len(p) == 0:
		return websocket.CloseError{Code: websocket.StatusNoStatusRcvd}, nil
	case len(p) == 1:
		return websocket.CloseError{}, errors.New("close frame of one byte")
	}
	ce := websocket.CloseError{Code: websocket.StatusCode(binary.BigEndian.Uint16(p)), Reason: string(p[2:])}
	if !sendableCode(ce.Code) {
		return websocket.CloseError{}, errors.New("close code that may not be sent")
	}
	if !utf8.ValidString(ce.Reason) {
		return websocket.CloseError{}, errCloseReason
	}
	return ce, nil
}

// errCloseReason is a close frame whose reason is not UTF-8: 1007 (RFC 6455 §8.1).
var errCloseReason = errors.New("close reason that is not UTF-8")

// sendableCode reports whether code may be in a close frame (RFC 6455 §7.4): 1000–1003 and
// 1007–1014 of the registered codes, and 3000–4999.
func sendableCode(code websocket.StatusCode) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	}
	return code >= 3000 && code <= 4999
}

// refuseHeader refuses a frame at its header: the frame's payload is not read, so nothing
// after it can be, and once the close frame has gone the socket is shut for writing and
// what the peer still sends is dropped until it is closed (corkConn.Close).
func (t *Transport) refuseHeader(code websocket.StatusCode, reason string) error {
	t.cork.drain.Store(true)
	return t.refuse(code, reason)
}

// refuse ends the reading with code: the Owner is told, and the close frame is sent now.
func (t *Transport) refuse(code websocket.StatusCode, reason string) error {
	if t.owner != nil {
		t.owner.CloseWith(code, reason)
	}
	t.cork.closeWithin(CloseGrace)
	t.sendClose(code, reason)
	return &refusal{code: code, reason: reason}
}
