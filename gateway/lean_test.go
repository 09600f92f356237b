package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair is a connected loopback pair: the server side wrapped in a
// corkConn, and the plain client side.
func tcpPair(t *testing.T) (*corkConn, net.Conn) {
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
	cc := newCorkConn(srv)
	if cc.raw == nil {
		t.Fatal("a TCP connection has no raw connection")
	}
	t.Cleanup(func() {
		cc.Close()
		cli.Close()
	})
	return cc, cli
}

// chunk i is 16 KiB of the number i.
func chunk(i int) []byte {
	b := make([]byte, 16<<10)
	for j := 0; j < len(b); j += 4 {
		binary.BigEndian.PutUint32(b[j:], uint32(i))
	}
	return b
}

// Writes to a peer that does not read never wait: what the socket does not
// take is kept, sent in order once the peer reads, and the writer can wait
// for it; meanwhile nothing is written around it.
func TestCorkConnKeepsBytesForSlowPeer(t *testing.T) {
	cc, cli := tcpPair(t)
	const chunks = 512 // 8 MiB: more than loopback socket buffers hold
	wrote := make(chan error, 1)
	go func() {
		for i := range chunks {
			if i%2 == 0 {
				if _, err := cc.Write(chunk(i)); err != nil {
					wrote <- err
					return
				}
				continue
			}
			cc.Cork()
			_, _ = cc.Write(chunk(i)[:100])
			_, _ = cc.Write(chunk(i)[100:])
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
	for i := 0; cc.backlog() == 0; i++ {
		if i == 2048 {
			t.Fatal("32 MiB went out to a peer that does not read")
		}
		if _, err := cc.Write(chunk(i)); err != nil {
			t.Fatal(err)
		}
	}
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
	if _, err := cc.Write([]byte("x")); err == nil {
		t.Fatal("a write after the failure succeeded")
	}
}

// A reader holding a large backlog of unsent bytes waits for the peer to
// take them before it reads on: a peer that only pings cannot make the
// pongs pile up.
func TestCorkConnReadWaitsForBacklog(t *testing.T) {
	cc, cli := tcpPair(t)
	total := 0
	for i := 0; cc.backlog() <= outBackpressure; i++ {
		if i == 2048 {
			t.Fatal("32 MiB went out to a peer that does not read")
		}
		if _, err := cc.Write(chunk(i)); err != nil {
			t.Fatal(err)
		}
		total += 16 << 10
	}
	if _, err := cli.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		b := make([]byte, 4)
		_, err := io.ReadFull(cc, b)
		if err == nil && string(b) != "ping" {
			err = errors.New("read " + string(b))
		}
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("read returned (%v) with %d bytes held back", err, cc.backlog())
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := io.CopyN(io.Discard, cli, int64(total)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not go on once the backlog was sent")
	}
}
