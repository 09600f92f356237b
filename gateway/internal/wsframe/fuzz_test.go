package wsframe

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"unicode/utf8"
)

// Whatever bytes arrive, ReadFrame and ParseHeader agree on the header, never panic, and a
// header re-encoded is the bytes it came from when they used the shortest length encoding.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58})
	f.Add([]byte{0x82, 0x7e, 0x01, 0x00})
	f.Add([]byte{0x02, 0xff, 0, 0, 0, 0, 0, 0, 1, 0, 1, 2, 3, 4})
	f.Add([]byte{0xf8, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x88, 0x02, 0x03, 0xe8})
	f.Fuzz(func(t *testing.T, in []byte) {
		ph, n, perr := ParseHeader(in)
		h, p, err := ReadFrame(bytes.NewReader(in), 1<<16)
		if perr != nil {
			if !errors.Is(perr, ErrShortHeader) || err == nil {
				t.Fatalf("ParseHeader %v, ReadFrame %v", perr, err)
			}
			return
		}
		if h != ph || n != HeaderLen(in[1]) {
			t.Fatalf("ParseHeader %+v (%d bytes), ReadHeader %+v", ph, n, h)
		}
		if n == ph.Len() && !bytes.Equal(ph.Append(nil), in[:n]) { // the shortest encoding
			t.Fatalf("% x re-encoded as % x", in[:n], ph.Append(nil))
		}
		switch {
		case h.Length < 0 || h.Length > 1<<16:
			if !errors.Is(err, ErrTooLong) {
				t.Fatalf("length %d: %v", h.Length, err)
			}
		case int64(len(in)-n) < h.Length:
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%d of %d bytes: %v", len(in)-n, h.Length, err)
			}
		default:
			want := bytes.Clone(in[n : n+int(h.Length)])
			if h.Masked {
				Mask(want, h.Mask)
			}
			if err != nil || !bytes.Equal(p, want) {
				t.Fatalf("payload %q, %v; want %q", p, err, want)
			}
		}
	})
}

// A frame written is the frame read: any opcode, fin, reserved bits, mask and payload, one
// frame after another in one stream.
func FuzzFrameRoundTrip(f *testing.F) {
	f.Add(byte(0x81), true, uint32(0x37fa213d), []byte("Hello"), []byte{})
	f.Add(byte(0x02), false, uint32(0), bytes.Repeat([]byte{7}, 300), []byte("x"))
	f.Add(byte(0x8a), false, uint32(1), []byte{}, bytes.Repeat([]byte("ab"), 40000))
	f.Fuzz(func(t *testing.T, b0 byte, masked bool, key uint32, p1, p2 []byte) {
		h := Header{Fin: b0&0x80 != 0, Rsv: b0 & 0x70, Op: Opcode(b0 & 0x0f), Masked: masked,
			Mask: [4]byte{byte(key >> 24), byte(key >> 16), byte(key >> 8), byte(key)}}
		if !masked {
			h.Mask = [4]byte{}
		}
		in := AppendFrame(AppendFrame(nil, h, p1), h, p2)
		r := bytes.NewReader(in)
		for _, want := range [][]byte{p1, p2} {
			got, p, err := ReadFrame(r, 1<<20)
			h.Length = int64(len(want))
			if err != nil || got != h || !bytes.Equal(p, want) {
				t.Fatalf("read %+v %d bytes, %v; want %+v %d bytes", got, len(p), err, h, len(want))
			}
		}
		if _, _, err := ReadFrame(r, 1<<20); err != io.EOF {
			t.Fatalf("after the frames: %v", err)
		}
		if !masked && h.Rsv == 0 && h.Fin {
			u := AppendHeader(nil, h.Op, len(p2))
			if !bytes.Equal(u, in[len(in)-len(p2)-len(u):len(in)-len(p2)]) {
				t.Fatalf("AppendHeader % x", u)
			}
		}
	})
}

// Any close payload parses to a code that may be sent and a UTF-8 reason, or an error; what
// parses is encoded again as it was.
func FuzzParseClose(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x03, 0xe8})
	f.Add([]byte{0x0f, 0xa0, 'b', 'y', 'e'})
	f.Add([]byte{0x03, 0xed})
	f.Add([]byte{0x03, 0xe8, 0xc3})
	f.Fuzz(func(t *testing.T, p []byte) {
		code, reason, err := ParseClose(p)
		if err != nil {
			return
		}
		if len(p) == 0 {
			if code != CodeNoStatus {
				t.Fatalf("empty payload: code %d", code)
			}
			return
		}
		if !SendableCode(code) || !utf8.ValidString(reason) {
			t.Fatalf("% x: %d %q", p, code, reason)
		}
		if len(p) <= MaxControlPayload && !bytes.Equal(ClosePayload(code, reason), p) {
			t.Fatalf("% x encoded again as % x", p, ClosePayload(code, reason))
		}
	})
}
