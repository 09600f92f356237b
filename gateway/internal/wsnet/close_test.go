package wsnet

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// A close the peer begins is answered with its code and reason, and Read returns it.
func TestClosePeerBegins(t *testing.T) {
	s := newTestServer(t, nil)
	ws, a := s.dial(t, "")
	read := make(chan error, 1)
	go func() {
		_, err := a.t.Read(context.Background())
		read <- err
	}()
	if err := ws.Close(4321, "bye"); err != nil { // nil: the echo had the same code
		t.Fatal(err)
	}
	err := <-read
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4321 || ce.Reason != "bye" || Status(err) != 4321 {
		t.Fatalf("Read: %v", err)
	}
	if _, err := a.t.Read(context.Background()); Status(err) != 4321 {
		t.Fatalf("a Read after the close: %v", err)
	}
}

// A close begun here ends once the peer's close frame is read: by the reader when one reads,
// and by CloseHandshake itself when none does; a peer that never answers is cut off.
func TestCloseWeBegin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reader  bool // a goroutine reads as CloseHandshake runs
		answers bool // the peer answers the close frame
	}{
		{"a reader, the peer answers", true, true},
		{"no reader, the peer answers", false, true},
		{"the peer does not answer", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, nil)
			c, br, a := s.dialRaw(t, nil)
			read := make(chan error, 1)
			if tc.reader {
				go func() {
					_, err := a.t.Read(context.Background())
					read <- err
				}()
			}
			closed := make(chan error, 1)
			go func() { closed <- a.t.CloseHandshake(4000, "heartbeat timeout") }()
			if code := readClose(t, br); code != 4000 {
				t.Fatalf("close %d", code)
			}
			if tc.answers {
				_, _ = c.Write([]byte{0x88, 0x82, 0, 0, 0, 0, 0x0f, 0xa0})
			}
			select {
			case <-closed:
			case <-time.After(CloseGrace + 10*time.Second):
				t.Fatal("CloseHandshake did not return")
			}
			if got := a.t.peerClosed() != nil; got != tc.answers {
				t.Fatalf("the peer's close frame read: %v", got)
			}
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the handshake the socket reads %v, want EOF", err)
			}
			if tc.reader {
				if err := <-read; Status(err) != 4000 {
					t.Fatalf("the reader's Read: %v", err)
				}
			}
			if err := a.t.CloseHandshake(1000, ""); err != nil {
				t.Fatalf("a second CloseHandshake: %v", err)
			}
		})
	}
}
