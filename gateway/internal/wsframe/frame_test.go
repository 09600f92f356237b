package wsframe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// Every length a header encodes differently, masked and not, reads back as it was written,
// from a byte slice and from a stream, in the bytes Len says.
func TestHeaderLengths(t *testing.T) {
	for _, n := range []int64{0, 1, 125, 126, 127, 0xffff, 0x10000, 1 << 40} {
		for _, masked := range []bool{false, true} {
			h := Header{Fin: true, Op: OpBinary, Masked: masked, Length: n}
			if masked {
				h.Mask = [4]byte{1, 2, 3, 4}
			}
			b := h.Append(nil)
			if len(b) != h.Len() || HeaderLen(b[1]) != len(b) {
				t.Fatalf("length %d masked %v: %d bytes, Len %d, HeaderLen %d", n, masked, len(b), h.Len(), HeaderLen(b[1]))
			}
			got, k, err := ParseHeader(append(b, 0xee))
			if err != nil || k != len(b) || got != h {
				t.Fatalf("length %d masked %v: parsed %+v (%d bytes, %v)", n, masked, got, k, err)
			}
			if got, err := ReadHeader(bytes.NewReader(b)); err != nil || got != h {
				t.Fatalf("length %d masked %v: read %+v, %v", n, masked, got, err)
			}
			if !masked {
				if u := AppendHeader(nil, OpBinary, int(n)); !bytes.Equal(u, b) || UnmaskedHeaderLen(int(n)) != len(b) {
					t.Fatalf("length %d: AppendHeader % x, Header.Append % x", n, u, b)
				}
			}
		}
	}
}

// A header cut anywhere is ErrShortHeader; nothing at all is io.EOF.
func TestShortHeader(t *testing.T) {
	b := Header{Fin: true, Op: OpText, Masked: true, Length: 300}.Append(nil)
	for i := range len(b) {
		if _, _, err := ParseHeader(b[:i]); !errors.Is(err, ErrShortHeader) {
			t.Fatalf("%d of %d bytes parsed: %v", i, len(b), err)
		}
		want := ErrShortHeader
		if i == 0 {
			want = io.EOF
		}
		if _, err := ReadHeader(bytes.NewReader(b[:i])); !errors.Is(err, want) {
			t.Fatalf("%d of %d bytes read: %v, want %v", i, len(b), err, want)
		}
	}
}

// The top bit of a 64-bit length reads as a negative length, which ReadFrame refuses unread.
func TestNegativeLength(t *testing.T) {
	b := binary.BigEndian.AppendUint64([]byte{0x82, 127}, 1<<63)
	h, _, err := ParseHeader(b)
	if err != nil || h.Length >= 0 {
		t.Fatalf("length %d, %v", h.Length, err)
	}
	if _, _, err := ReadFrame(bytes.NewReader(b), 1<<20); !errors.Is(err, ErrTooLong) {
		t.Fatalf("ReadFrame: %v", err)
	}
}

// Mask is its own inverse and the bytewise XOR of RFC 6455 §5.3, at every alignment.
func TestMask(t *testing.T) {
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	for n := range 40 {
		p := bytes.Repeat([]byte("Hello, wörld"), 4)[:n]
		got := bytes.Clone(p)
		Mask(got, key)
		for i := range p {
			if got[i] != p[i]^key[i%4] {
				t.Fatalf("%d bytes: byte %d is %x, want %x", n, i, got[i], p[i]^key[i%4])
			}
		}
		Mask(got, key)
		if !bytes.Equal(got, p) {
			t.Fatalf("%d bytes: masked twice, % x", n, got)
		}
	}
}

// RFC 6455 §5.7's examples read as they say.
func TestRFCExamples(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		op   Opcode
		fin  bool
		p    string
	}{
		{"unmasked text", []byte{0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f}, OpText, true, "Hello"},
		{"masked text", []byte{0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58}, OpText, true, "Hello"},
		{"first fragment", []byte{0x01, 0x03, 0x48, 0x65, 0x6c}, OpText, false, "Hel"},
		{"last fragment", []byte{0x80, 0x02, 0x6c, 0x6f}, OpContinuation, true, "lo"},
		{"ping", []byte{0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f}, OpPing, true, "Hello"},
	} {
		h, p, err := ReadFrame(bytes.NewReader(tc.in), 125)
		if err != nil || h.Op != tc.op || h.Fin != tc.fin || string(p) != tc.p {
			t.Fatalf("%s: %+v %q %v", tc.name, h, p, err)
		}
	}
}

// A close payload carries its code and reason, a long reason cut at a character's end; codes
// that may not be sent give an empty payload, and what a peer may not send is refused.
func TestClosePayload(t *testing.T) {
	long := string(bytes.Repeat([]byte("é"), 100)) // 200 bytes
	p := ClosePayload(4000, long)
	code, reason, err := ParseClose(p)
	if err != nil || code != 4000 || len(p) > MaxControlPayload || len(reason) != 122 {
		t.Fatalf("%d %d bytes of reason, %v", code, len(reason), err)
	}
	for _, c := range []int{0, CodeNoStatus, CodeAbnormal, 1015, 2999, 5000} {
		if p := ClosePayload(c, "x"); p != nil {
			t.Fatalf("code %d: payload % x", c, p)
		}
	}
	if code, _, err := ParseClose(nil); err != nil || code != CodeNoStatus {
		t.Fatalf("empty: %d %v", code, err)
	}
	for _, tc := range []struct {
		p    []byte
		want error
	}{
		{[]byte{3}, ErrCloseShort},
		{[]byte{0x03, 0xed}, ErrCloseCode}, // 1005
		{[]byte{0x03, 0xe8, 0xff}, ErrCloseReason},
	} {
		if _, _, err := ParseClose(tc.p); !errors.Is(err, tc.want) {
			t.Fatalf("% x: %v, want %v", tc.p, err, tc.want)
		}
	}
}
