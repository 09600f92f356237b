package wsnet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// readAnyFrame reads one server frame of any length from br: its first byte and payload.
func readAnyFrame(t *testing.T, br *bufio.Reader) (byte, []byte) {
	t.Helper()
	h := make([]byte, 2)
	if _, err := io.ReadFull(br, h); err != nil {
		t.Fatalf("frame header: %v", err)
	}
	if h[1]&0x80 != 0 {
		t.Fatalf("a masked server frame: %x", h)
	}
	n := uint64(h[1])
	switch h[1] {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			t.Fatal(err)
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			t.Fatal(err)
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	return h[0], p
}

// numbered is frame i of n bytes: its number, then filler.
func numbered(i, n int) []byte {
	b := bytes.Repeat([]byte{'x'}, n)
	copy(b, fmt.Sprintf("%d ", i))
	return b
}

// Frames built here are read by the WebSocket library's client as the messages they carry,
// at every length a header encodes differently.
func TestFramesReadByTheLibrary(t *testing.T) {
	s := newTestServer(t, nil)
	ws, a := s.dial(t, "")
	msgs := everyLength(ws)
	a.t.Cork()
	for _, m := range msgs {
		if err := a.t.Write(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.t.Uncork(); err != nil {
		t.Fatal(err)
	}
	readMessages(t, ws, msgs)
}

// A frame is never built into one the library is writing in pieces, nor after the
// library's close frame: Write leaves the frame to the library then.
func TestFramesWaitForTheLibrarysFrame(t *testing.T) {
	cc, cli := tcpPair(t)
	pong := append([]byte{0x8a, 100}, bytes.Repeat([]byte{'p'}, 100)...)
	if _, err := cc.Write(pong[:16]); err != nil { // as the library's 16-byte writer does
		t.Fatal(err)
	}
	if ok, _ := cc.writeFrame(opText, []byte("data")); ok {
		t.Fatal("Write built a frame inside the library's frame")
	}
	if _, err := cc.Write(pong[16:]); err != nil {
		t.Fatal(err)
	}
	if ok, err := cc.writeFrame(opText, []byte("data")); !ok || err != nil {
		t.Fatalf("after the library's frame: Write %v, %v", ok, err)
	}
	closeFrame := []byte{0x88, 2, 0x03, 0xe9}
	for _, b := range closeFrame { // a byte at a time: the header's end is what counts
		if _, err := cc.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := cc.writeFrame(opText, []byte("late")); ok {
		t.Fatal("Write built a frame after the library's close frame")
	}
	br := bufio.NewReader(cli)
	_ = cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, want := range []struct {
		b0 byte
		p  string
	}{{0x8a, string(pong[2:])}, {0x81, "data"}, {0x88, string(closeFrame[2:])}} {
		if b0, p := readAnyFrame(t, br); b0 != want.b0 || string(p) != want.p {
			t.Fatalf("frame %x %q, want %x %q", b0, p, want.b0, want.p)
		}
	}
}

// readMessages reads msgs, text messages, from ws.
func readMessages(t *testing.T, ws *websocket.Conn, msgs [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, want := range msgs {
		typ, got, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if typ != websocket.MessageText || !bytes.Equal(got, want) {
			t.Fatalf("message %d: %v of %d bytes, want text of %d", i, typ, len(got), len(want))
		}
	}
}

// everyLength is a message of each length a header encodes differently, and raises ws's
// read limit for them.
func everyLength(ws *websocket.Conn) [][]byte {
	ws.SetReadLimit(1 << 20)
	var msgs [][]byte
	for i, n := range []int{0, 1, 125, 126, 127, 0xffff, 0x10000, 300 << 10} {
		msgs = append(msgs, numbered(i, n))
	}
	return msgs
}
