package wsnet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/gateway/internal/wsframe"
	"github.com/ballet/gateway/rpc"
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

// Frames built here are read by coder/websocket's client as the messages they carry,
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

// Pongs and the close frame go between data frames, whole, and nothing follows the close
// frame: a data frame after it is not written and fails.
func TestFramesStopAtTheCloseFrame(t *testing.T) {
	cc, cli := tcpPair(t)
	pong := bytes.Repeat([]byte{'p'}, 100)
	closeFrame := []byte{0x03, 0xe9}
	for _, step := range []func() error{
		func() error { return cc.writeFrame(framing{op: wsframe.OpText}, []byte("data")) },
		func() error { return cc.writeControl(wsframe.OpPong, pong) },
		func() error { return cc.writeFrame(framing{op: wsframe.OpText}, []byte("more")) },
		func() error { return cc.writeControl(wsframe.OpClose, closeFrame) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cc.writeFrame(framing{op: wsframe.OpText}, []byte("late")); !errors.Is(err, errClosedFrame) {
		t.Fatalf("a data frame after the close frame: %v", err)
	}
	if err := cc.writeControl(wsframe.OpPong, pong); !errors.Is(err, errClosedFrame) {
		t.Fatalf("a pong after the close frame: %v", err)
	}
	br := bufio.NewReader(cli)
	_ = cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, want := range []struct {
		b0 byte
		p  string
	}{{0x81, "data"}, {0x8a, string(pong)}, {0x81, "more"}, {0x88, string(closeFrame)}} {
		if b0, p := readAnyFrame(t, br); b0 != want.b0 || string(p) != want.p {
			t.Fatalf("frame %x %q, want %x %q", b0, p, want.b0, want.p)
		}
	}
	cc.Close()
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("a byte after the close frame")
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

// What a write leaves of small bodies is copied into one piece with the envelopes around them,
// and a large body kept where it is: the collector follows one reference per large body.
func TestRestCopiesSmallBodies(t *testing.T) {
	small := bytes.Repeat([]byte("s"), 100)
	large := bytes.Repeat([]byte("L"), 4096)
	fs := []rpc.Out{
		{Head: []byte("h1"), Body: small, Tail: []byte("}"), Keep: true},
		{Head: []byte("h2"), Body: small, Keep: true},
		{Head: []byte("h3"), Body: large, Tail: []byte("}"), Keep: true},
		{Head: []byte("h4"), Body: small, Keep: true},
	}
	g := gathers.Get().(*gather)
	defer g.put()
	total := g.build(framing{op: wsframe.OpBinary}, fs)
	var want []byte
	for _, p := range g.parts {
		want = append(want, p...)
	}
	for _, skip := range []int{0, 1, 50, 200, 300, 4000, total - 1} {
		p := g.rest(skip)
		var got []byte
		for _, part := range p.parts {
			got = append(got, part...)
		}
		if !bytes.Equal(got, want[skip:]) || p.n != total-skip {
			t.Fatalf("skip %d: %d bytes, want %d", skip, len(got), total-skip)
		}
		if skip < 200 && (len(p.parts) != 3 || &p.parts[1][0] != &large[0]) {
			t.Fatalf("skip %d: %d pieces, want the small ones copied around the large body", skip, len(p.parts))
		}
	}
}
