package wsnet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/gateway/internal/wsframe"
	"github.com/ballet/gateway/internal/heaptest"
)

// part is a masked client frame of opcode op under the mask 0, final or not.
func part(op wsframe.Opcode, fin bool, p string) []byte {
	f := clientFrames([]byte(p), op, 0, [4]byte{})
	if !fin {
		f[0] &^= 0x80
	}
	return f
}

// Text that is not UTF-8 closes 1007 at the fragment that carries it, not at the message's
// end; a character split between two fragments (or three) is UTF-8.
func TestUTF8CheckedPerFragment(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	for _, tc := range []struct {
		name   string
		frames [][]byte
		want   string // the message; "" for a close 1007
	}{
		{"a split character", [][]byte{part(wsframe.OpText, false, "h\xc3"), part(wsframe.OpContinuation, true, "\xa9llo")}, "h\u00e9llo"},
		{"a character in three fragments", [][]byte{part(wsframe.OpText, false, "\xf0\x9f"), part(wsframe.OpContinuation, false, "\x98"),
			part(wsframe.OpContinuation, true, "\x80!")}, "\U0001F600!"},
		{"an invalid first fragment", [][]byte{part(wsframe.OpText, false, "ok \xff")}, ""},
		{"a split character completed wrongly", [][]byte{part(wsframe.OpText, false, "\xe2\x82"), part(wsframe.OpContinuation, false, "(")}, ""},
		{"a surrogate begun", [][]byte{part(wsframe.OpText, false, "a\xed\xa0")}, ""},
		{"a split character never completed", [][]byte{part(wsframe.OpText, false, "\xe2\x82"), part(wsframe.OpContinuation, true, "")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { // one at a time: the server's connections come in order
			var first []byte
			for _, f := range tc.frames {
				first = append(first, f...)
			}
			_, br, a := s.dialRaw(t, first)
			got := make(chan error, 1)
			go func() {
				msg, err := a.t.Read(context.Background())
				if err == nil && string(msg) != tc.want {
					err = fmt.Errorf("message %q, want %q", msg, tc.want)
				}
				got <- err
			}()
			if tc.want != "" {
				if err := <-got; err != nil {
					t.Fatal(err)
				}
				return
			}
			// No final frame follows: the reading must end at the fragment.
			if code := readClose(t, br); code != websocket.StatusInvalidFramePayloadData {
				t.Fatalf("close %d, want 1007", code)
			}
			if err := <-got; err == nil {
				t.Fatal("the message was read")
			}
		})
	}
}

// utf8Prefix agrees with utf8.Valid on every split of a text into two fragments.
func TestUTF8PrefixSplits(t *testing.T) {
	t.Parallel()
	texts := []string{"h\u00e9llo \u20ac \U0001F600", "\xe0\xa0\x80\xed\x9f\xbf\xf4\x8f\xbf\xbf", "\xe0\x80\x80", "\xed\xa0\x80",
		"\xf4\x90\x80\x80", "\xc0\xaf", "\xf8\x88\x80\x80\x80", "ab\x80", "\xc3", "\xe2\x82\xac\xe2"}
	for _, s := range texts {
		for i := 0; i <= len(s); i++ {
			p := []byte(s)
			k, ok := utf8Prefix(p[:i])
			if ok {
				k2, ok2 := utf8Prefix(p[k:])
				ok, k = ok2 && k+k2 == len(p), k+k2
			}
			if ok != utf8.ValidString(s) {
				t.Errorf("%q split at %d: %v, utf8.Valid %v", s, i, ok, utf8.ValidString(s))
			}
		}
	}
}

// declaredHeap bounds the heap one connection holds once its peer has sent a header declaring
// a payload of the read limit and nothing of it: one piece (pieceMin), with room to spare.
const declaredHeap = 2 * pieceMin

// A frame's header reserves nothing: 480 connections whose peers each declare a payload of
// 1 MiB (the read limit) and send none of it hold at most declaredHeap bytes of heap each
// more than before (they held 1 MiB each when the header was taken on trust).
func TestDeclaredLengthReservesNothing(t *testing.T) {
	const n, limit = 480, 1 << 20
	s := newTestServer(t, nil)
	type peer struct {
		c   net.Conn
		got chan struct{}
	}
	peers := make([]peer, n)
	var readers sync.WaitGroup
	t.Cleanup(readers.Wait) // after the transports are aborted (cleanups run last first)
	for i := range peers {
		c, br, a := s.dialRaw(t, part(wsframe.OpPing, true, "a"))
		a.t.Attach(a.o, false, limit) // nothing reads yet
		got := make(chan struct{}, 2)
		readers.Go(func() { _, _ = a.t.Read(context.Background()) })
		readers.Go(func() {
			for {
				op, _ := readFrameErr(br)
				if op != wsframe.OpPong {
					return
				}
				got <- struct{}{}
			}
		})
		peers[i] = peer{c, got}
	}
	for _, p := range peers {
		<-p.got // every reader now waits for the next header, its read buffer in hand
	}
	base := heaptest.LiveHeap()
	for _, p := range peers {
		// A ping, then a header of 1 MiB: once the pong is out, the reader has the header.
		if _, err := p.c.Write(append(part(wsframe.OpPing, true, "b"), frameHeader(wsframe.OpText, limit)...)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range peers {
		<-p.got
	}
	per := (heaptest.LiveHeap() - base) / n
	t.Logf("%d bytes of heap more per connection after a header declaring %d bytes; %d bytes counted as partial",
		per, limit, PartialBytes())
	if got := PartialBytes(); got > n*pieceMin {
		t.Errorf("%d bytes counted as partial, want at most %d", got, n*pieceMin)
	}
	if per > declaredHeap {
		t.Fatalf("a header declaring %d bytes holds %d bytes of heap, bound %d", limit, per, declaredHeap)
	}
	// What the peers send is held, and not much more: 16 of them send all the payload but its
	// last byte (the docs' worst case of a connection mid-way through a message).
	const sending = 16
	base = heaptest.LiveHeap()
	partial := PartialBytes()
	for _, p := range peers[:sending] {
		if _, err := p.c.Write(make([]byte, limit-1)); err != nil {
			t.Fatal(err)
		}
	}
	want := partial + sending*(limit-pieceMin) // each reader has taken its last piece
	deadline := time.Now().Add(30 * time.Second)
	for PartialBytes() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes counted as partial, want %d", PartialBytes(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	sent := (heaptest.LiveHeap() - base) / sending
	t.Logf("%d bytes of heap more per connection that sent %d bytes of the payload", sent, limit-1)
	if sent > limit+declaredHeap {
		t.Fatalf("%d bytes of a payload held in %d bytes of heap", limit-1, sent)
	}
}

// frameHeader is the header of a final masked client frame declaring n payload bytes.
func frameHeader(op wsframe.Opcode, n uint64) []byte {
	return wsframe.Header{Fin: true, Op: op, Masked: true, Length: int64(n)}.Append(nil)
}

// readFrameErr reads one short server frame from br: its opcode, or 0 when reading failed.
func readFrameErr(br *bufio.Reader) (wsframe.Opcode, []byte) {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil || h[1] > 125 {
		return 0, nil
	}
	p := make([]byte, h[1])
	if _, err := io.ReadFull(br, p); err != nil {
		return 0, nil
	}
	return wsframe.Opcode(h[0] & 0x0f), p
}

// The budget of messages not yet whole (Options.PartialMessageBytes) is taken before a
// fragmented message's buffer grows: a peer sending 1 KiB fragments (each read in place)
// of a message it never ends is closed 1013 as the buffer would pass 64 KiB, counted once,
// and what it held is given back.
func TestPartialBudgetBoundsFragments(t *testing.T) {
	t.Parallel()
	const budget = 64 << 10
	var refused atomic.Int32
	s := newTestServer(t, &Options{PartialMessageBytes: budget, PartialRefused: func() { refused.Add(1) }})
	c, br, a := s.dialRaw(t, nil)
	a.t.Attach(a.o, false, 1<<20) // nothing reads yet
	var frames []byte
	frames = append(frames, part(wsframe.OpText, false, strings.Repeat("a", 1<<10))...)
	for range 99 {
		frames = append(frames, part(wsframe.OpContinuation, false, strings.Repeat("a", 1<<10))...)
	}
	got := make(chan error, 1)
	go func() { _, err := a.t.Read(context.Background()); got <- err }()
	go func() { _, _ = c.Write(frames) }() // the server stops reading at the refusal
	if code := readClose(t, br); code != websocket.StatusTryAgainLater {
		t.Fatalf("close %d, want 1013", code)
	}
	if err := <-got; err == nil {
		t.Fatal("the message was read")
	}
	if n := refused.Load(); n != 1 {
		t.Fatalf("%d refusals counted, want 1", n)
	}
	if n := s.u.PartialBytes(); n != 0 {
		t.Fatalf("%d bytes still held after the close", n)
	}
}
