package wsnet

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/gateway/internal/wsframe"
)

// memConn is a net.Conn that reads in and writes into out: a Transport over it reads what a
// fuzz target gives and answers into a buffer. Reads come in pieces of at most step bytes.
type memConn struct {
	in   *bytes.Reader
	step int
	out  bytes.Buffer
}

func (c *memConn) Read(p []byte) (int, error) {
	if c.step > 0 && len(p) > c.step {
		p = p[:c.step]
	}
	return c.in.Read(p)
}
func (c *memConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *memConn) Close() error                     { return nil }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// memTransport is a Transport reading in, in pieces of step bytes, text or binary.
func memTransport(in []byte, step int, binary bool, limit int64) (*Transport, *memConn) {
	mc := &memConn{in: bytes.NewReader(in), step: step}
	t := newTransport(mc, time.Second, nil)
	t.Attach(&owner{}, binary, limit)
	return t, mc
}

// clientFrames frames msg as a client does: masked with key, in fragments of frag bytes
// (all of it when frag is 0), with a ping before each continuation.
func clientFrames(msg []byte, op wsframe.Opcode, frag int, key [4]byte) []byte {
	var b []byte
	frame := func(op wsframe.Opcode, fin bool, p []byte) {
		b = wsframe.AppendFrame(b, wsframe.Header{Fin: fin, Op: op, Masked: true, Mask: key}, p)
	}
	if frag <= 0 || frag >= len(msg) {
		frame(op, true, msg)
		return b
	}
	for i := 0; i < len(msg); i += frag {
		end := min(i+frag, len(msg))
		if i > 0 {
			frame(wsframe.OpPing, true, []byte("p"))
			op = wsframe.OpContinuation
		}
		frame(op, end == len(msg), msg[i:end])
	}
	return b
}

// Messages framed as clients may frame them (masked with any key, fragmented anywhere, also
// inside a character of a text, pings between the fragments, read in pieces of any size,
// frames long enough to be read into pooled pieces) are read back exactly, and every ping
// is answered.
func FuzzReadMessages(f *testing.F) {
	f.Add([]byte("hello"), []byte(`{"jsonrpc":"2.0"}`), uint16(0), uint8(0), uint32(0), false)
	f.Add([]byte("héllo wörld"), []byte{}, uint16(2), uint8(1), uint32(0xdeadbeef), false)
	f.Add(bytes.Repeat([]byte{0xff}, 300), []byte{1, 2, 3}, uint16(100), uint8(7), uint32(1), true)
	f.Add(bytes.Repeat([]byte("x"), 70000), []byte("y"), uint16(0), uint8(0), uint32(7), true)
	// Fragments that split characters, and frames long enough to be read in pieces.
	f.Add([]byte("€uro \U0001F600 ünï"), bytes.Repeat([]byte("ä€😀"), 4000), uint16(1), uint8(3), uint32(9), false)
	f.Add(bytes.Repeat([]byte("ab€"), 30000), bytes.Repeat([]byte{7}, 9000), uint16(5000), uint8(0), uint32(3), false)
	f.Add([]byte("ok \xe2\x82( then more"), []byte{}, uint16(4), uint8(1), uint32(5), false) // refused at its fragment
	f.Add([]byte("\xf0\x9f\x98\x80\xff"), []byte{}, uint16(2), uint8(0), uint32(5), false)   // refused only at its last
	f.Fuzz(func(t *testing.T, m1, m2 []byte, frag uint16, step uint8, key uint32, bin bool) {
		op := wsframe.OpBinary
		var k [4]byte
		binary.BigEndian.PutUint32(k[:], key)
		if !bin {
			op = wsframe.OpText
			if !utf8.Valid(m1) {
				checkTextPrefix(t, m1, int(frag), int(step), k)
				return
			}
			if !utf8.Valid(m2) {
				return
			}
		}
		in := append(clientFrames(m1, op, int(frag), k), clientFrames(m2, op, int(frag)/3, k)...)
		tr, mc := memTransport(in, int(step), bin, 1<<20)
		for i, want := range [][]byte{m1, m2} {
			got, err := tr.Read(context.Background())
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("message %d: %d bytes, %v; want %d bytes", i, len(got), err, len(want))
			}
		}
		if _, err := tr.Read(context.Background()); !errors.Is(err, io.EOF) {
			t.Fatalf("after the messages: %v, want EOF", err)
		}
		if n := PartialBytes(); n != 0 {
			t.Fatalf("%d bytes still counted as partial", n)
		}
		pongs := bytes.Count(mc.out.Bytes(), []byte{0x8a, 1, 'p'})
		if want := bytes.Count(in, []byte{0x89, 0x81}); pongs != want {
			t.Fatalf("%d pongs for %d pings", pongs, want)
		}
	})
}

// checkTextPrefix sends text (not UTF-8) in fragments of frag bytes but its last: the reading
// must fail 1007 at the fragment that makes it more than the beginning of UTF-8 text, and
// when what was sent still is such a beginning, end only as the input does.
func checkTextPrefix(t *testing.T, text []byte, frag, step int, k [4]byte) {
	if frag <= 0 || frag >= len(text) {
		return
	}
	sent := (len(text) - 1) / frag * frag
	in := clientFrames(text, wsframe.OpText, frag, k)
	in = in[:len(in)-len(clientFrames(text[sent:], wsframe.OpText, 0, k))] // the last fragment
	tr, mc := memTransport(in, step, false, 1<<20)
	_, err := tr.Read(context.Background())
	var r *refusal
	refused := errors.As(err, &r) && r.code == websocket.StatusInvalidFramePayloadData
	if want := !textBeginning(text[:sent]); refused != want {
		t.Fatalf("%q sent of %q: refused %v (%v), want %v", text[:sent], text, refused, err, want)
	}
	checkServerFrames(t, mc.out.Bytes())
}

// textBeginning reports whether p is the beginning of some UTF-8 text: p, or p and up to three
// bytes more, is UTF-8.
func textBeginning(p []byte) bool {
	if utf8.Valid(p) {
		return true
	}
	ends := []byte{0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf}
	var try func(q []byte, more int) bool
	try = func(q []byte, more int) bool {
		if utf8.Valid(q) {
			return true
		}
		if more == 0 {
			return false
		}
		for _, b := range ends {
			if try(append(q[:len(q):len(q)], b), more-1) {
				return true
			}
		}
		return false
	}
	return try(p, 3)
}

// Whatever bytes a peer sends, Read returns messages within the limit and of the
// subprotocol's kind, text only when UTF-8, or an error (once it has failed, it fails again);
// it never panics, and what it writes are whole server frames. A text that is not UTF-8
// fails at the fragment that carries it: the reading never ends for lack of a later frame.
func FuzzReadBytes(f *testing.F) {
	f.Add([]byte{0x81, 0x82, 0, 0, 0, 0, 'h', 'i'}, uint8(0), false)
	f.Add([]byte{0x89, 0x80, 1, 2, 3, 4, 0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8}, uint8(1), false)
	f.Add([]byte{0x01, 0x81, 0, 0, 0, 0, 'a', 0x80, 0x81, 0, 0, 0, 0, 'b'}, uint8(3), false)
	f.Add([]byte{0x82, 0xff, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, uint8(0), true)
	f.Add([]byte{0xc1, 0x80, 0, 0, 0, 0}, uint8(0), false)
	f.Add([]byte{0x88, 0x81, 0, 0, 0, 0, 3}, uint8(0), false)
	f.Add(append(append([]byte{0x01, 0x82, 0, 0, 0, 0, 'a', 0xe2}, 0x80, 0x81, 0, 0, 0, 0, 0x82), 0x80, 0x80, 0, 0, 0, 0, 0xac), uint8(2), false)
	f.Add([]byte{0x01, 0x81, 0, 0, 0, 0, 0xff, 0x80, 0x81, 0, 0, 0, 0, 'b'}, uint8(0), false)
	f.Add(append([]byte{0x82, 0xfe, 0x30, 0x00, 0, 0, 0, 0}, bytes.Repeat([]byte{1}, 0x3000)...), uint8(0), true)
	f.Add(append([]byte{0x81, 0xfe, 0x40, 0x00, 0, 0, 0, 0}, bytes.Repeat([]byte("é"), 0x1000)...), uint8(0), false)
	f.Fuzz(func(t *testing.T, in []byte, step uint8, bin bool) {
		const limit = 20 << 10 // past readChunk: payloads are read into pieces
		tr, mc := memTransport(in, int(step), bin, limit)
		var failed error
		for range len(in) + 1 {
			msg, err := tr.Read(context.Background())
			if failed != nil {
				if err == nil {
					t.Fatalf("a message after the reading failed with %v", failed)
				}
				break
			}
			if err != nil {
				failed = err
				continue
			}
			if len(msg) > limit {
				t.Fatalf("a message of %d bytes, limit %d", len(msg), limit)
			}
			if !bin && !utf8.Valid(msg) {
				t.Fatalf("text message that is not UTF-8: %q", msg)
			}
		}
		if failed == nil {
			t.Fatal("the reading never ended")
		}
		if n := PartialBytes(); n != 0 {
			t.Fatalf("%d bytes still counted as partial after the reading failed", n)
		}
		checkServerFrames(t, mc.out.Bytes())
	})
}

// checkServerFrames fails unless out is whole server frames: final, unmasked, control frames
// short, at most one close frame and it last.
func checkServerFrames(t *testing.T, out []byte) {
	t.Helper()
	for len(out) > 0 {
		if len(out) < 2 || out[0]&0xf0 != 0x80 || out[1]&0x80 != 0 {
			t.Fatalf("not a final unmasked frame: % x", out[:min(len(out), 14)])
		}
		op, n := wsframe.Opcode(out[0]&0x0f), int(out[1]&0x7f)
		if op < wsframe.OpClose || n > wsframe.MaxControlPayload || len(out) < 2+n {
			t.Fatalf("frame % x", out[:min(len(out), 14)])
		}
		if op == wsframe.OpClose {
			if len(out) != 2+n {
				t.Fatalf("%d bytes after the close frame", len(out)-2-n)
			}
			if _, _, err := wsframe.ParseClose(out[2 : 2+n]); err != nil {
				t.Fatalf("close frame % x: %v", out[2:2+n], err)
			}
		}
		out = out[2+n:]
	}
}
