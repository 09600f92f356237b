package wsnet

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The connection and parking lean on how coder/websocket uses the bufio.Reader and
// bufio.Writer that Hijack hands it (leanReadBuffer and leanWriteBuffer bytes over the
// corkConn): it reads and writes through them and no buffer of its own, and it flushes the
// writer as each frame ends. An upgrade of the library that changed this would break the
// mechanisms without a compile error; these tests fail instead.

// pending reports whether bytes the library has read from the socket wait in user space: in
// Hijack's reader or in the corkConn's read buffer. Park parks only when none do.
func (t *Transport) pending() bool { return t.br.Buffered() > 0 || t.cork.readPending() }

// What the library has read and not yet returned is in Hijack's reader or the corkConn's read
// buffer, where Park sees it: it never parks a connection whose next message has been read.
func TestLibraryReadsThroughHijacksReader(t *testing.T) {
	s := newTestServer(t, nil)
	c, _, a := s.dialRaw(t, nil)
	if a.t.pending() {
		t.Fatal("bytes pending before the peer sent any")
	}
	// Three messages in one write, all in the socket before the first read.
	if _, err := c.Write([]byte(string(masked("one")) + string(masked("two")) + string(masked("three")))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	for i, want := range []string{"one", "two", "three"} {
		got, err := a.t.Read(context.Background())
		if err != nil || string(got) != want {
			t.Fatalf("message %d: %q, %v; want %q", i, got, err, want)
		}
		if more := i < 2; a.t.pending() != more {
			t.Fatalf("after message %d of 3: bytes pending %v, want %v: the library keeps a buffer of its own", i+1, !more, more)
		}
		if i < 2 && a.t.Park(func() {}) {
			t.Fatalf("after message %d of 3: parked with the next one read", i+1)
		}
	}
}

// Bytes net/http read with the upgrade request (a frame sent in the same write) are read
// first, and are pending: Park does not park before they are read.
func TestLibraryReadsEarlyBytesFirst(t *testing.T) {
	s := newTestServer(t, nil)
	c, _, a := s.dialRaw(t, masked("early"))
	if !a.t.pending() {
		t.Fatal("the frame sent with the upgrade request is not pending")
	}
	for _, want := range []string{"early", "late"} {
		got, err := a.t.Read(context.Background())
		if err != nil || string(got) != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
		if _, err := c.Write(masked("late")); err != nil {
			t.Fatal(err)
		}
	}
}

// Every frame the library writes has reached the corkConn when Write returns (whether it is
// shorter or longer than Hijack's writer's buffer), so that a corked batch is whole frames and
// Uncork sends all of them in one write; nothing goes around the corkConn to the peer.
func TestLibraryWritesThroughHijacksWriter(t *testing.T) {
	s := newTestServer(t, nil)
	c, br, a := s.dialRaw(t, nil)
	msgs := []string{"a", strings.Repeat("b", 100), "c"}
	a.t.Cork()
	corked := 0
	for _, m := range msgs {
		if err := a.t.ws.Write(context.Background(), websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
		corked += 2 + len(m) // a server's frame: two bytes of header up to 125 bytes
		a.t.cork.mu.Lock()
		got := len(*a.t.cork.buf)
		a.t.cork.mu.Unlock()
		if got != corked {
			t.Fatalf("%d bytes of frames written, %d reached the connection: the library holds the rest", corked, got)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var ne net.Error
	if n, err := c.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read %d bytes, %v before Uncork: the library writes around the connection", n, err)
	}
	if err := a.t.Uncork(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, want := range msgs {
		if op, got := readFrame(t, br); op != 1 || string(got) != want {
			t.Fatalf("got frame %d %q, want text %q", op, got, want)
		}
	}
}
