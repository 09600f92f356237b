package wsframe

import (
	"encoding/binary"
	"errors"
	"io"
)

// Opcode is a frame's opcode (RFC 6455 §5.2).
type Opcode byte

// The opcodes RFC 6455 defines; the others are reserved.
const (
	OpContinuation Opcode = 0x0
	OpText         Opcode = 0x1
	OpBinary       Opcode = 0x2
	OpClose        Opcode = 0x8
	OpPing         Opcode = 0x9
	OpPong         Opcode = 0xa
)

// IsControl reports whether op is a control frame's (close, ping, pong, or a reserved one).
func (op Opcode) IsControl() bool { return op&0x8 != 0 }

const (
	// MaxHeaderLen is the longest frame header: 2 bytes, 8 of extended length, 4 of mask.
	MaxHeaderLen = 14
	// MaxUnmaskedHeaderLen is the longest header of an unmasked frame (a server's).
	MaxUnmaskedHeaderLen = 10
	// MaxControlPayload is the longest payload of a control frame (RFC 6455 §5.5).
	MaxControlPayload = 125
)

// Header is one frame's header.
type Header struct {
	Fin    bool
	Rsv    byte // the three reserved bits, where they are in the first byte (0x70)
	Op     Opcode
	Masked bool
	// Length is the payload's length; one past 2^63-1 (the header's top bit set, which RFC
	// 6455 forbids) reads as negative.
	Length int64
	Mask   [4]byte // when Masked
}

// ErrShortHeader is a header cut short: a byte slice or a stream that ends inside it.
var ErrShortHeader = errors.New("wsframe: frame header cut short")

// HeaderLen is the length of a header whose second byte is b1: 2 to MaxHeaderLen bytes.
func HeaderLen(b1 byte) int {
	n := 2
	switch b1 & 0x7f {
	case 126:
		n = 4
	case 127:
		n = 10
	}
	if b1&0x80 != 0 {
		n += 4
	}
	return n
}

// ParseHeader decodes the header at the start of p and returns it and its length; when p
// ends before the header does, it returns ErrShortHeader.
func ParseHeader(p []byte) (Header, int, error) {
	if len(p) < 2 {
		return Header{}, 0, ErrShortHeader
	}
	n := HeaderLen(p[1])
	if len(p) < n {
		return Header{}, 0, ErrShortHeader
	}
	return DecodeHeader(p[:n]), n, nil
}

// DecodeHeader decodes hdr, a whole header: its length is HeaderLen(hdr[1]), which the caller
// has checked (ParseHeader checks it). It is written to be inlined where a connection reads
// its frames (within the compiler's budget: mind its cost when changing it).
func DecodeHeader(hdr []byte) Header {
	b0, b1 := hdr[0], hdr[1]
	h := Header{Fin: b0 >= 0x80, Rsv: b0 & 0x70, Op: Opcode(b0 & 0x0f), Masked: b1 >= 0x80, Length: int64(b1 & 0x7f)}
	switch h.Length {
	case 126:
		h.Length = int64(binary.BigEndian.Uint16(hdr[2:]))
	case 127:
		h.Length = int64(binary.BigEndian.Uint64(hdr[2:]))
	}
	if h.Masked { // the mask ends the header
		h.Mask = [4]byte(hdr[len(hdr)-4:])
	}
	return h
}

// ReadHeader reads one header from r. A stream that ends inside the header gives
// ErrShortHeader; one that ends before it, io.EOF.
func ReadHeader(r io.Reader) (Header, error) {
	var b [MaxHeaderLen]byte
	if _, err := io.ReadFull(r, b[:2]); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = ErrShortHeader
		}
		return Header{}, err
	}
	n := HeaderLen(b[1])
	if _, err := io.ReadFull(r, b[2:n]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = ErrShortHeader
		}
		return Header{}, err
	}
	return DecodeHeader(b[:n]), nil
}

// Len is the length of h's encoding (Append). A negative Length encodes as 8 bytes.
func (h Header) Len() int {
	n := 10
	if h.Length >= 0 && h.Length <= 0xffff {
		n = UnmaskedHeaderLen(int(h.Length))
	}
	if h.Masked {
		n += 4
	}
	return n
}

// Append appends h's encoding to b, with the shortest length encoding.
func (h Header) Append(b []byte) []byte {
	b0 := h.Rsv&0x70 | byte(h.Op)&0x0f
	if h.Fin {
		b0 |= 0x80
	}
	var m byte
	if h.Masked {
		m = 0x80
	}
	switch n := h.Length; {
	case n >= 0 && n <= 125:
		b = append(b, b0, m|byte(n))
	case n >= 0 && n <= 0xffff:
		b = append(b, b0, m|126, byte(n>>8), byte(n))
	default:
		b = binary.BigEndian.AppendUint64(append(b, b0, m|127), uint64(n))
	}
	if h.Masked {
		b = append(b, h.Mask[:]...)
	}
	return b
}

// UnmaskedHeaderLen is the length of the header of an unmasked frame of n >= 0 payload bytes
// (AppendHeader's).
func UnmaskedHeaderLen(n int) int {
	switch {
	case n <= 125:
		return 2
	case n <= 0xffff:
		return 4
	}
	return 10
}

// AppendHeader appends the header of a final, unmasked frame of opcode op and n payload bytes
// (n >= 0): a server's frame, none of whose header fields but these vary. It is Header.Append
// for such a frame, short enough to be inlined where a batch of frames is built.
func AppendHeader(b []byte, op Opcode, n int) []byte {
	switch {
	case n <= 125:
		return append(b, 0x80|byte(op), byte(n))
	case n <= 0xffff:
		return append(b, 0x80|byte(op), 126, byte(n>>8), byte(n))
	}
	b = append(b, 0x80|byte(op), 127)
	return binary.BigEndian.AppendUint64(b, uint64(n))
}
