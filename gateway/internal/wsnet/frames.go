package wsnet

import (
	"encoding/binary"
	"sync"
)

// The server's frames are framed here: each is final, unmasked and uncompressed (the
// connection never negotiates an extension), a data frame of the subprotocol's kind or a
// control frame (RFC 6455 §5.2). The rpc connection's frames go out with their headers in one
// vectored write, with no copy.

const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa
)

// headerLen is the length of the header of a server frame of n payload bytes.
func headerLen(n int) int {
	switch {
	case n <= 125:
		return 2
	case n <= 0xffff:
		return 4
	}
	return 10
}

// headerSize is the length of a frame header, without its mask, from its second byte b1.
func headerSize(b1 byte) uint8 {
	switch b1 & 0x7f {
	case 126:
		return 4
	case 127:
		return 10
	}
	return 2
}

// payloadLen is the payload length a frame header (without its mask) gives.
func payloadLen(hdr []byte) uint64 {
	switch k := hdr[1] & 0x7f; k {
	case 126:
		return uint64(binary.BigEndian.Uint16(hdr[2:4]))
	case 127:
		return binary.BigEndian.Uint64(hdr[2:10])
	default:
		return uint64(k)
	}
}

// appendHeader appends the header of a final, unmasked frame of opcode op and n payload bytes
// (RFC 6455 §5.2).
func appendHeader(b []byte, op byte, n int) []byte {
	switch {
	case n <= 125:
		return append(b, 0x80|op, byte(n))
	case n <= 0xffff:
		return append(b, 0x80|op, 126, byte(n>>8), byte(n))
	}
	b = append(b, 0x80|op, 127)
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

// appendFrames appends frames, each after its header.
func appendFrames(b []byte, op byte, frames [][]byte) []byte {
	for _, f := range frames {
		b = appendHeader(b, op, len(f))
		b = append(b, f...)
	}
	return b
}

// framesLen is the bytes frames take with their headers.
func framesLen(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		n += headerLen(len(f)) + len(f)
	}
	return n
}

// gather is a pooled scratch for one vectored write: the frames' headers one after another,
// the pieces (header, frame, header, …) the write sends, and the system call's state.
type gather struct {
	hdr   []byte
	parts [][]byte
	vectored
}

var gathers = sync.Pool{New: func() any { return &gather{hdr: make([]byte, 0, 64), parts: make([][]byte, 0, 16)} }}

// build makes g's pieces for frames and returns their bytes.
func (g *gather) build(op byte, frames [][]byte) int {
	g.hdr, g.parts = g.hdr[:0], g.parts[:0]
	for _, f := range frames {
		g.hdr = appendHeader(g.hdr, op, len(f))
	}
	off, n := 0, 0
	for _, f := range frames {
		h := headerLen(len(f))
		g.parts = append(g.parts, g.hdr[off:off+h:off+h])
		if len(f) > 0 {
			g.parts = append(g.parts, f)
		}
		off += h
		n += h + len(f)
	}
	return n
}

// appendParts appends the bytes of parts after their first skip.
func appendParts(b []byte, parts [][]byte, skip int) []byte {
	for _, p := range parts {
		if skip >= len(p) {
			skip -= len(p)
			continue
		}
		b = append(b, p[skip:]...)
		skip = 0
	}
	return b
}

func (g *gather) put() {
	clear(g.parts) // holds no frame
	if cap(g.hdr) <= 4<<10 && cap(g.parts) <= 2*maxGatherFrames {
		gathers.Put(g)
	}
}

// maxGatherFrames is the most frames one vectored write sends (two pieces each; Linux takes
// up to 1024).
const maxGatherFrames = 256
