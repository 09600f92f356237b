package wsframe

import (
	"errors"
	"io"
)

// ErrTooLong is a frame whose payload is longer than ReadFrame was allowed to read.
var ErrTooLong = errors.New("wsframe: frame payload over the limit")

// ReadFrame reads one frame from r: its header, and its payload, unmasked, when it is at most
// limit bytes; a longer one (or one whose length reads as negative) is ErrTooLong, with its
// payload not read. A stream that ends inside the frame gives ErrShortHeader or
// io.ErrUnexpectedEOF; one that ends before it, io.EOF.
func ReadFrame(r io.Reader, limit int64) (Header, []byte, error) {
	h, err := ReadHeader(r)
	if err != nil {
		return h, nil, err
	}
	if h.Length < 0 || h.Length > limit {
		return h, nil, ErrTooLong
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, err
	}
	if h.Masked {
		Mask(p, h.Mask)
	}
	return h, p, nil
}

// AppendFrame appends a frame of h (its Length set to len(payload)) and payload to b, the
// payload masked with h.Mask when h.Masked.
func AppendFrame(b []byte, h Header, payload []byte) []byte {
	h.Length = int64(len(payload))
	b = h.Append(b)
	start := len(b)
	b = append(b, payload...)
	if h.Masked {
		Mask(b[start:], h.Mask)
	}
	return b
}
