package wsnet

import (
	"errors"
	"math/bits"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/gateway/internal/wsframe"
)

// A frame's header declares its length, but its payload's memory is taken as the bytes
// arrive, not as the header declares them: a peer that sends a header declaring the read
// limit and nothing after it makes the server hold at most pieceMin bytes more than it has
// sent. A short payload (under readChunk), one the message already has room for, or one no
// longer than what the message already holds (a fragment: the message at most doubles), is
// read in place; a longer one into pooled pieces, each at most as large as what has arrived
// before it (between pieceMin and pieceMax bytes), then copied onto the message once whole:
// one allocation per message, as when its length was taken on trust, and the pieces go back
// to their pools.

// partialBytes is what the process holds for payloads not yet whole: the pieces of long
// frames, and the messages of which a fragment but not the last has arrived. Short frames of
// one piece (under readChunk) are left out: at most readChunk each, and on the fast path.
var partialBytes atomic.Int64

// PartialBytes is the heap this process's connections hold for messages whose frames have
// not all arrived (the gateway's ballet_gateway_partial_message_bytes).
func PartialBytes() int64 { return partialBytes.Load() }

// partialBudget bounds what the connections of one Upgrader hold for payloads not yet whole,
// together (Options.PartialMessageBytes): each piece, and each growth of a fragmented message,
// is taken from it before its memory is, and a connection whose next one would take the total
// past it is closed 1013 (try again later). A Transport without one (nil) counts only in
// partialBytes.
type partialBudget struct {
	held    atomic.Int64
	max     int64  // 0: no bound
	refused func() // Options.PartialRefused, or nil
}

// take counts n more bytes; false, counting nothing, when they would take the total past the
// budget.
func (b *partialBudget) take(n int64) bool {
	if b != nil {
		for {
			h := b.held.Load()
			if b.max > 0 && h+n > b.max {
				return false
			}
			if b.held.CompareAndSwap(h, h+n) {
				break
			}
		}
	}
	partialBytes.Add(n)
	return true
}

// give uncounts n bytes that take counted.
func (b *partialBudget) give(n int64) {
	if b != nil {
		b.held.Add(-n)
	}
	partialBytes.Add(-n)
}

// partialBudgetReason is the reason of the close (1013) of a connection whose next piece the
// budget has no room for.
const partialBudgetReason = "the server holds too many unfinished messages; try again later"

// refusePartial closes the connection 1013 as the budget has no room for its next piece
// (errNoRoom); the rest of the frame is not read.
func (t *Transport) refusePartial() error {
	if t.r.partial != nil && t.r.partial.refused != nil {
		t.r.partial.refused()
	}
	return t.refuseHeader(websocket.StatusTryAgainLater, partialBudgetReason)
}

const (
	pieceMin = 4 << 10
	pieceMax = 64 << 10
)

// piecePools hold pieces of pieceMin, 2×pieceMin, … pieceMax bytes.
var piecePools [5]sync.Pool

func init() {
	for i := range piecePools {
		size := pieceMin << i
		piecePools[i].New = func() any { b := make([]byte, size); return &b }
	}
}

// pieceClass is the pool of the next piece of a payload of which got bytes have arrived and
// left are still due: no larger than what has arrived (and at least pieceMin), nor than the
// smallest piece that holds what is left.
func pieceClass(got, left int) int {
	c := 0
	for c < len(piecePools)-1 && pieceMin<<(c+1) <= got {
		c++
	}
	for c > 0 && pieceMin<<(c-1) >= left {
		c--
	}
	return c
}

// errNoRoom is a payload whose next piece the budget has no room for: the reading is refused
// 1013 (Transport.refusePartial).
var errNoRoom = errors.New("wsnet: " + partialBudgetReason)

// payload reads a frame's n payload bytes onto msg and unmasks them with key. Unless the
// frame is a whole message by itself (fin, and msg empty), msg's capacity is counted in
// partialBytes, *held of it so far. When the budget has no room for the next piece it
// returns errNoRoom, the rest of the frame unread.
func (r *reader) payload(msg []byte, n int, key [4]byte, fin bool, held *int64) ([]byte, error) {
	start := len(msg)
	if n < readChunk || n <= cap(msg)-start || n <= start {
		if (start > 0 || !fin) && !r.hold(msg, start+n, held) {
			return nil, errNoRoom
		}
		msg = growTo(msg, start+n)
		p := msg[start:]
		if err := r.readFull(p); err != nil {
			return nil, err
		}
		wsframe.Mask(p, key)
		return msg, nil
	}
	var inHand [32]*[]byte
	pieces := inHand[:0]
	for got := 0; got < n; {
		c := pieceClass(got, n-got)
		if !r.partial.take(pieceMin << c) {
			r.putPieces(pieces)
			return nil, errNoRoom
		}
		p := piecePools[c].Get().(*[]byte)
		pieces = append(pieces, p)
		b := (*p)[:min(len(*p), n-got)]
		if err := r.readFull(b); err != nil {
			r.putPieces(pieces)
			return nil, err
		}
		got += len(b)
	}
	if (start > 0 || !fin) && !r.hold(msg, start+n, held) {
		r.putPieces(pieces)
		return nil, errNoRoom
	}
	msg = growTo(msg, start+n)
	off := start
	for _, p := range pieces {
		off += copy(msg[off:], *p)
	}
	r.putPieces(pieces)
	wsframe.Mask(msg[start:], key)
	return msg, nil
}

// hold counts the capacity of msg grown to n bytes (growTo) in the budget before it grows,
// *held of it counted so far; false when the budget has no room for it.
func (r *reader) hold(msg []byte, n int, held *int64) bool {
	c := int64(cap(msg))
	if n > cap(msg) {
		c = int64(max(n, 2*len(msg)))
	}
	if c <= *held {
		return true
	}
	if !r.partial.take(c - *held) {
		return false
	}
	*held = c
	return true
}

// putPieces gives pieces back to their pools, and their bytes to the budget.
func (r *reader) putPieces(pieces []*[]byte) {
	n := 0
	for _, p := range pieces {
		n += len(*p)
		piecePools[bits.TrailingZeros(uint(len(*p)/pieceMin))].Put(p)
	}
	if n > 0 {
		r.partial.give(int64(n))
	}
}

// growTo is b extended to n bytes: its capacity at least doubles what it holds, so that a
// message read in many fragments is copied a bounded number of times, and is never more than
// twice what has arrived (and the fragment being read).
func growTo(b []byte, n int) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*len(b)))
	copy(nb, b)
	return nb
}

// utf8Prefix checks p, the text of a message so far, which may end inside a character split
// between two fragments: it returns how many of p's bytes are whole characters, and false
// when p is not the beginning of UTF-8 text.
func utf8Prefix(p []byte) (int, bool) {
	if utf8.Valid(p) {
		return len(p), true
	}
	for i := len(p) - 1; i >= 0 && i >= len(p)-3; i-- {
		if utf8.RuneStart(p[i]) {
			if !partialRune(p[i:]) || !utf8.Valid(p[:i]) {
				return 0, false
			}
			return i, true
		}
	}
	return 0, false
}

// partialRune reports whether p begins the encoding of a character and ends before it does
// (Unicode's table of well-formed UTF-8 byte sequences).
func partialRune(p []byte) bool {
	need, lo, hi := 0, byte(0x80), byte(0xbf)
	switch b := p[0]; {
	case b >= 0xc2 && b <= 0xdf:
		need = 2
	case b == 0xe0:
		need, lo = 3, 0xa0
	case b == 0xed:
		need, hi = 3, 0x9f
	case b >= 0xe1 && b <= 0xef:
		need = 3
	case b == 0xf0:
		need, lo = 4, 0x90
	case b == 0xf4:
		need, hi = 4, 0x8f
	case b >= 0xf1 && b <= 0xf3:
		need = 4
	default:
		return false
	}
	if len(p) >= need {
		return false
	}
	for i, c := range p[1:] {
		if i > 0 {
			lo, hi = 0x80, 0xbf
		}
		if c < lo || c > hi {
			return false
		}
	}
	return true
}
