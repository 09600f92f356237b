package wsnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway/internal/wsframe"
)

// sockBuf is the send buffer of tcpPair's server side and the receive
// buffer of its client side. Set, the kernel keeps them as they are
// (doubled) instead of growing them, so what it can hold for a peer that
// does not read is bounded: less than fillBacklog.
const sockBuf = 64 << 10

// tcpPair is a connected loopback pair: the server side wrapped in a
// writer, and the plain client side.
func tcpPair(t *testing.T) (*writer, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	if err := cli.(*net.TCPConn).SetReadBuffer(sockBuf); err != nil {
		t.Fatal(err)
	}
	if err := srv.(*net.TCPConn).SetWriteBuffer(sockBuf); err != nil {
		t.Fatal(err)
	}
	cc := newWriter(srv, defaultFlushStall)
	if cc.raw == nil {
		t.Fatal("a TCP connection has no raw connection")
	}
	t.Cleanup(func() {
		cc.Close()
		cli.Close()
	})
	return cc, cli
}

// put sends p as it is, not framed, or gathers it while corked: bytes the tests can follow.
func (c *writer) put(p []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		*c.buf = append(*c.buf, p...)
		return nil
	}
	return c.sendLocked(p)
}

// chunk i is 16 KiB of the number i.
func chunk(i int) []byte {
	b := make([]byte, 16<<10)
	for j := 0; j < len(b); j += 4 {
		binary.BigEndian.PutUint32(b[j:], uint32(i))
	}
	return b
}

// fillBacklog is how much fillSocket leaves held back: more than the
// socket buffers of a tcpPair take (about 270 KiB on Linux), so that a
// flusher can never send it all.
const fillBacklog = 1 << 20

// fillSocket writes corked chunks to a peer that does not read until the
// writer holds back fillBacklog bytes. Stopping at the first byte held
// back would not do: the socket refuses a write while its buffer waits
// for the peer to acknowledge what is in flight, and on a loaded machine
// those acknowledgements come late, after which it takes what was held
// back, and the flusher ends as if the peer read.
//
// A flusher with a short stall may give up on the peer before the fill
// is done; the socket is full then, and fillSocket returns.
func fillSocket(t *testing.T, cc *writer) {
	t.Helper()
	for i := 0; cc.backlog() < fillBacklog; i++ {
		if i == 2048 {
			t.Fatal("32 MiB went out to a peer that does not read")
		}
		cc.Cork()
		_ = cc.put(chunk(i))
		if err := cc.Uncork(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && cc.stall < defaultFlushStall {
				return
			}
			t.Fatal(err)
		}
	}
}

// Writes to a peer that does not read never wait: what the socket does not
// take is kept, sent in order once the peer reads, and the writer can wait
// for it; meanwhile nothing is written around it. (The rpc connection's
// writes are corked; its queues bound them.)
func TestCorkConnKeepsBytesForSlowPeer(t *testing.T) {
	cc, cli := tcpPair(t)
	const chunks = 512 // 8 MiB: more than loopback socket buffers hold
	wrote := make(chan error, 1)
	go func() {
		for i := range chunks {
			cc.Cork()
			_ = cc.put(chunk(i)[:100])
			_ = cc.put(chunk(i)[100:])
			if err := cc.Uncork(); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("writes waited for a peer that does not read")
	}
	if cc.canTry() || cc.backlog() == 0 {
		t.Fatalf("after 8 MiB to a peer that does not read: canTry %v, backlog %d", cc.canTry(), cc.backlog())
	}
	waited := make(chan error, 1)
	go func() { waited <- cc.wait() }()
	got := make([]byte, 16<<10)
	for i := range chunks {
		if _, err := io.ReadFull(cli, got); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if !bytes.Equal(got, chunk(i)) {
			t.Fatalf("chunk %d arrived out of order (starts with %d)", i, binary.BigEndian.Uint32(got))
		}
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if !cc.canTry() || cc.backlog() != 0 {
		t.Fatalf("after the peer read everything: canTry %v, backlog %d", cc.canTry(), cc.backlog())
	}
}

// Closing the connection ends the flusher: a waiting writer gets the
// error, and so does every later write.
func TestCorkConnCloseEndsFlusher(t *testing.T) {
	cc, _ := tcpPair(t)
	fillSocket(t, cc)
	waited := make(chan error, 1)
	go func() { waited <- cc.wait() }()
	cc.Close()
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("wait returned no error for bytes never sent")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing did not end the flusher")
	}
	if err := cc.put([]byte("x")); err == nil {
		t.Fatal("a write after the failure succeeded")
	}
}

// Control frames (pongs) to a peer that does not read are bounded: past maxUnreadControl the
// connection is closed.
func TestCorkConnBoundsUnreadControlFrames(t *testing.T) {
	cc, cli := tcpPair(t)
	fillSocket(t, cc)
	pong := make([]byte, 125)
	sent := 0
	for {
		if err := cc.writeControl(wsframe.OpPong, pong); err != nil {
			if !errors.Is(err, errUnreadControl) {
				t.Fatalf("error %v, want errUnreadControl", err)
			}
			break
		}
		if sent += 2 + len(pong); sent > maxUnreadControl+2+len(pong) {
			t.Fatalf("%d bytes of pongs taken for a peer that does not read", sent)
		}
	}
	if sent < maxUnreadControl-len(pong) {
		t.Fatalf("closed after %d bytes of pongs", sent)
	}
	// The peer sees the connection end.
	_ = cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, cli); err != nil && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the connection stayed open")
		}
	}
}

// A peer that takes nothing for the stall time fails the connection, and
// the flusher ends instead of waiting for it for ever.
func TestCorkConnFlusherGivesUpOnStalledPeer(t *testing.T) {
	cc, _ := tcpPair(t)
	cc.stall = 200 * time.Millisecond
	fillSocket(t, cc)
	done := make(chan error, 1)
	go func() { done <- cc.wait() }()
	select {
	case err := <-done:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("wait = %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the flusher still waits for a peer that reads nothing")
	}
	if err := cc.put([]byte("x")); err == nil {
		t.Fatal("a write after the stall succeeded")
	}
}
