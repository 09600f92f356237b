package wsnet

import (
	"io"
	"sync"

	"github.com/ballet/gateway/gateway/internal/wsframe"
)

// reader is the read side of a connection: the peer's bytes, taken from src through a pooled
// buffer filled by reads of up to readChunk bytes and held only while it has unread bytes,
// cut into frame headers (here) and payloads (payload.go). A payload of readChunk bytes or
// more is read straight into its message. It is part of its Transport, not an allocation of
// its own; the Transport's read.go makes messages of its frames.
type reader struct {
	// mu is held by whoever reads the peer's frames: Transport.Read, or a close handshake with
	// no reader. It guards the fields below but src, limit, first and partial (set before
	// anything reads).
	mu  sync.Mutex
	src io.Reader // the socket
	buf *[]byte   // pooled, while it has unread bytes
	off int       // the first unread byte of buf
	err error     // once a read failed, every later read's error

	limit   int64          // the longest message read; set by Attach
	first   int64          // the longest first message, when shorter; set by LimitFirst
	readOne bool           // a message was read: first no longer applies
	partial *partialBudget // the Upgrader's, for payloads not yet whole (payload.go); nil: none
}

var readBufs = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// readChunk is the size of the pooled read buffer.
const readChunk = 4 << 10

// next returns the next n bytes read (n <= readChunk), valid until the next read.
func (r *reader) next(n int) ([]byte, error) {
	if r.buf == nil {
		r.buf = readBufs.Get().(*[]byte)
		*r.buf = (*r.buf)[:0]
		r.off = 0
	}
	b := *r.buf
	if len(b)-r.off < n && cap(b)-r.off < n { // make room: move the unread bytes to the front
		k := copy(b[:cap(b)], b[r.off:])
		b, r.off = b[:k], 0
	}
	for len(b)-r.off < n {
		m, err := r.src.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil && len(b)-r.off < n {
			*r.buf = b
			return nil, err
		}
	}
	*r.buf = b
	p := b[r.off : r.off+n]
	r.off += n
	return p, nil
}

// readFull fills p with the next bytes read.
func (r *reader) readFull(p []byte) error {
	for len(p) > 0 {
		if r.buf != nil && r.off < len(*r.buf) {
			k := copy(p, (*r.buf)[r.off:])
			r.off += k
			p = p[k:]
			continue
		}
		if len(p) >= readChunk {
			n, err := r.src.Read(p)
			if err != nil && n < len(p) {
				return err
			}
			p = p[n:]
			continue
		}
		if _, err := r.next(len(p)); err != nil {
			return err
		}
		r.off -= len(p) // next made them unread; copy them above
	}
	return nil
}

// skip reads and drops the next n bytes.
func (r *reader) skip(n int64) error {
	for n > 0 {
		k := int(min(n, readChunk))
		if _, err := r.next(k); err != nil {
			return err
		}
		n -= int64(k)
	}
	return nil
}

// done gives the read buffer back when nothing in it is unread: between messages, an idle
// connection holds none.
func (r *reader) done() {
	if r.buf != nil && r.off == len(*r.buf) {
		*r.buf = (*r.buf)[:readChunk]
		readBufs.Put(r.buf)
		r.buf, r.off = nil, 0
	}
}

// unread makes p (copied) the first bytes read.
func (r *reader) unread(p []byte) {
	b := make([]byte, len(p), max(len(p), readChunk))
	copy(b, p)
	r.buf, r.off = &b, 0
}

// pending reports whether bytes read are not yet taken.
func (r *reader) pending() bool { return r.buf != nil && r.off < len(*r.buf) }

// header reads the next frame header. Of a frame that is not masked (a client's always is:
// the caller refuses it) only the first two bytes are read, and the header is the zero one.
func (r *reader) header() (wsframe.Header, error) {
	p, err := r.next(2)
	if err != nil || p[1]&0x80 == 0 {
		return wsframe.Header{}, err
	}
	var hdr [wsframe.MaxHeaderLen]byte
	hdr[0], hdr[1] = p[0], p[1]
	n := wsframe.HeaderLen(hdr[1])
	if p, err = r.next(n - 2); err != nil {
		return wsframe.Header{}, err
	}
	copy(hdr[2:], p)
	return wsframe.DecodeHeader(hdr[:n]), nil
}
