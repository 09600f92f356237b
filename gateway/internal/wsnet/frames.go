package wsnet

import (
	"encoding/binary"
	"sync"
)

// The rpc connection's frames are framed here rather than by the WebSocket library: its write
// takes three locks, a select and two writes into the corkConn per frame, which cost a
// delivery as much as the system call that sends it. A frame built here is a final, unmasked,
// uncompressed text or binary frame, as the library would build it (the connection never
// negotiates compression). The library still writes its own frames (pongs, the close frame)
// through corkConn.Write, and a data frame when it can not be built here (see libFrames).

const (
	opText   = 0x1
	opBinary = 0x2
	opClose  = 0x8
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

// libFrames follows the frames the WebSocket library writes through the corkConn, so that a
// frame built here goes between two of them and never into one: the library writes a frame in
// pieces (its writer's buffer is 16 bytes), each piece a corkConn.Write under the corkConn's
// lock, and a frame written between two pieces would corrupt both. It also sees the library's
// close frame, after which no data frame may follow (RFC 6455 §5.5.1). The corkConn's lock
// guards it.
type libFrames struct {
	frameHeads
	closed bool // the library has written a close frame
}

// frameHeads follows a stream of frames up to their headers: the header read so far, and
// the payload still to come.
type frameHeads struct {
	hdr     [14]byte
	hn      uint8 // header bytes seen
	need    uint8 // the header's length, once its second byte is seen
	payload int64 // payload bytes of the current frame still to come
}

// step takes from p the payload still to come, or else the header's next byte, and returns
// the rest: hn is 0 unless it took a header's byte.
func (h *frameHeads) step(p []byte) []byte {
	if h.payload > 0 {
		k := min(int64(len(p)), h.payload)
		h.payload -= k
		return p[k:]
	}
	h.hdr[h.hn] = p[0]
	h.hn++
	return p[1:]
}

// between reports whether the library is between frames.
func (l *libFrames) between() bool { return l.hn == 0 && l.payload == 0 }

// scan follows p, the next bytes the library wrote: a server's frames, never masked.
func (l *libFrames) scan(p []byte) {
	for len(p) > 0 {
		if p = l.step(p); l.hn == 0 {
			continue
		}
		if l.hn == 2 {
			l.need = headerSize(l.hdr[1])
		}
		if l.hn < 2 || l.hn < l.need {
			continue
		}
		if l.hdr[0]&0x0f == opClose {
			l.closed = true
		}
		l.hn, l.need, l.payload = 0, 0, int64(min(payloadLen(l.hdr[:]), 1<<62))
	}
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
