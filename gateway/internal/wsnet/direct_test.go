//go:build !nodirect

package wsnet

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway/internal/wsframe"
	"github.com/ballet/gateway/rpc"
)

// TryWrite's frames are read by coder/websocket's client as the messages they carry, at
// every length a header encodes differently, in one vectored write.
func TestDirectFramesReadByTheLibrary(t *testing.T) {
	s := newTestServer(t, nil)
	ws, a := s.dial(t, "")
	msgs := everyLength(ws)
	if ok, err := a.t.TryWrite(bodies(msgs...)); !ok || err != nil {
		t.Fatalf("TryWrite: %v, %v", ok, err)
	}
	readMessages(t, ws, msgs)
}

// TryWrite declines once the close frame has gone.
func TestDirectFramesStopAtTheCloseFrame(t *testing.T) {
	cc, _ := tcpPair(t)
	if ok, err := cc.tryFrames(framing{op: wsframe.OpText}, bodies([]byte("data"))); !ok || err != nil {
		t.Fatalf("before the close frame: TryWrite %v, %v", ok, err)
	}
	if err := cc.writeControl(wsframe.OpClose, []byte{0x03, 0xe9}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := cc.tryFrames(framing{op: wsframe.OpText}, bodies([]byte("late"))); ok {
		t.Fatal("TryWrite wrote after the close frame")
	}
}

// A peer that sends pings of 100 bytes (answered by the reader) while frames go out on the
// direct path reads every pong and every frame whole and in order.
func TestFramesBetweenPongs(t *testing.T) {
	s := newTestServer(t, nil)
	c, br, a := s.dialRaw(t, nil)
	go func() { // the reader answers pings as it reads
		for {
			if _, err := a.t.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	const pings, frames = 200, 2000
	payload := strings.Repeat("q", 100)
	go func() {
		ping := append([]byte{0x89, 0x80 | 100, 0, 0, 0, 0}, payload...) // masked with 0
		for range pings {
			if _, err := c.Write(ping); err != nil {
				return
			}
		}
	}()
	wrote := make(chan error, 1)
	go func() {
		for i := range frames {
			f := [][]byte{numbered(i, 40+i%200)}
			ok, err := a.t.TryWrite(bodies(f...))
			if !ok { // as the rpc connection's writer does
				a.t.Cork()
				err = a.t.Write(context.Background(), f[0])
				if uerr := a.t.Uncork(); err == nil {
					err = uerr
				}
			}
			if err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	pongs, next := 0, 0
	for pongs < pings || next < frames {
		b0, p := readAnyFrame(t, br)
		switch b0 {
		case 0x8a:
			if string(p) != payload {
				t.Fatalf("pong %d: %q", pongs, p)
			}
			pongs++
		case 0x81:
			if want := numbered(next, 40+next%200); !bytes.Equal(p, want) {
				t.Fatalf("frame %d: %q, want %q", next, p, want)
			}
			next++
		default:
			t.Fatalf("after %d frames and %d pongs: a frame %x", next, pongs, b0)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// Frames the socket does not take at once (a peer that does not read), in more vectored
// writes than one, reach the peer whole and in order once it reads.
func TestFramesKeptForSlowPeer(t *testing.T) {
	cc, cli := tcpPair(t)
	const batches, per = 40, 3 * maxGatherFrames / 2
	sent := 0
	for b := range batches {
		fs := make([][]byte, per)
		for i := range fs {
			fs[i] = numbered(b*per+i, 200)
		}
		ok, err := cc.tryFrames(framing{op: wsframe.OpBinary}, bodies(fs...))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		sent += per
	}
	if sent == batches*per || cc.canTry() {
		t.Fatalf("%d frames of 200 bytes went to a peer that does not read", sent)
	}
	br := bufio.NewReader(cli)
	_ = cli.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := range sent {
		if b0, p := readAnyFrame(t, br); b0 != 0x82 || !bytes.Equal(p, numbered(i, 200)) {
			t.Fatalf("frame %d: %x %q", i, b0, p[:10])
		}
	}
	if err := cc.wait(); err != nil {
		t.Fatal(err)
	}
}

// A message whose body stays unchanged (rpc.Out.Keep: an event's body, shared by many
// connections) is kept by reference when the socket leaves it for later: what a peer that
// does not read holds is a copy of the envelopes and headers, not of the bodies. The peer
// reads every frame whole and in order once it reads.
func TestKeptBodiesAreNotCopied(t *testing.T) {
	cc, cli := tcpPair(t)
	body := bytes.Repeat([]byte("b"), 2048)
	const frames = 4000 // 8 MB: more than the socket buffers take
	next, left := 0, false
	deadline := time.Now().Add(20 * time.Second)
	for next < frames && !left {
		fs := make([]rpc.Out, 100)
		for i := range fs {
			fs[i] = rpc.Out{Head: []byte(fmt.Sprintf("h%05d:", next+i)), Body: body, Tail: []byte("}"), Keep: true}
		}
		ok, err := cc.tryFrames(framing{op: wsframe.OpBinary}, fs)
		if err != nil || (!ok && time.Now().After(deadline)) {
			t.Fatalf("TryWrite: %v, %v", ok, err)
		}
		if !ok {
			// A writer goroutine (in the builds that have one) is sending what was left: the
			// frames go after it, once it is done.
			time.Sleep(time.Millisecond)
			continue
		}
		next += len(fs)
		cc.mu.Lock()
		// What was left may have gone already (the socket made room, and a writer goroutine, in
		// the builds that have one, sent it): then write more.
		if cc.out != nil && len(cc.out.parts) > 0 {
			left = true
			copied, shared := 0, 0
			for _, p := range cc.out.parts {
				if len(p) > 0 && &p[len(p)-1] == &body[len(body)-1] {
					shared++
				} else {
					copied += len(p)
				}
			}
			// At most one body is cut (a write ended inside it) and copied; every other is
			// where it was. The copies are the envelopes: 8 bytes, a header and a tail each.
			if shared == 0 || copied > (shared+1)*(8+wsframe.MaxUnmaskedHeaderLen+1)+len(body) {
				t.Errorf("left for later: %d bodies by reference, %d bytes copied", shared, copied)
			}
		}
		cc.mu.Unlock()
	}
	if !left {
		t.Fatalf("the socket took %d frames of 2 KB from a peer that does not read", next)
	}
	br := bufio.NewReader(cli)
	_ = cli.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := range next {
		want := append(append([]byte(fmt.Sprintf("h%05d:", i)), body...), '}')
		if b0, p := readAnyFrame(t, br); b0 != 0x82 || !bytes.Equal(p, want) {
			t.Fatalf("frame %d: %x %q", i, b0, p[:10])
		}
	}
	if err := cc.wait(); err != nil {
		t.Fatal(err)
	}
}

// WriteFrames sends after what a TryWrite left and keeps what the socket does not take, with
// no flusher of its own: the caller's wait sends it, on the caller's goroutine.
func TestWriteFramesWaitsForThePeer(t *testing.T) {
	cc, cli := tcpPair(t)
	body := bytes.Repeat([]byte("w"), 4096)
	const frames = 2000 // 8 MB
	fs := make([]rpc.Out, frames)
	for i := range fs {
		fs[i] = rpc.Out{Head: []byte(fmt.Sprintf("%05d", i)), Body: body, Keep: i%2 == 0}
	}
	read := make(chan error, 1)
	go func() {
		br := bufio.NewReader(cli)
		_ = cli.SetReadDeadline(time.Now().Add(30 * time.Second))
		for i := range 2 * frames {
			want := append([]byte(fmt.Sprintf("%05d", i%frames)), body...)
			if b0, p := readAnyFrame(t, br); b0 != 0x82 || !bytes.Equal(p, want) {
				read <- fmt.Errorf("frame %d: %x %q", i, b0, p[:10])
				return
			}
			if i == frames/2 {
				time.Sleep(50 * time.Millisecond) // the writer waits meanwhile
			}
		}
		read <- nil
	}()
	if ok, err := cc.tryFrames(framing{op: wsframe.OpBinary}, fs); !ok || err != nil {
		t.Fatalf("TryWrite: %v, %v", ok, err)
	}
	if err := cc.writeFrames(framing{op: wsframe.OpBinary}, fs); err != nil {
		t.Fatal(err)
	}
	cc.mu.Lock()
	flusher := cc.flusher
	cc.mu.Unlock()
	if cc.backlog() == 0 || flusher {
		t.Fatalf("WriteFrames left %d bytes, a flusher running: %v", cc.backlog(), flusher)
	}
	if err := cc.wait(); err != nil { // sends the rest here
		t.Fatal(err)
	}
	if n := cc.backlog(); n != 0 {
		t.Fatalf("wait returned with %d bytes unsent", n)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
}
