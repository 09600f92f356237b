//go:build linux && !nopark && !nofd

package poller

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// fdPair is a loopback pair: the server side served by its descriptor on a poller, and the
// plain client side.
func fdPair(t *testing.T) (*fdConn, net.Conn) {
	t.Helper()
	tc, cli := tcpPair(t)
	ip := New()
	pc := new(Conn)
	c, ok := Own(tc, ip, pc)
	if !ok {
		t.Fatal("a TCP socket was not served by its descriptor")
	}
	fc := c.(*fdConn)
	*pc = ip.Conn((*fdRaw)(fc))
	t.Cleanup(func() { fc.Close() })
	return fc, cli
}

// openFDs is the number of this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// A socket served by its descriptor reads what the peer sends when it sends it, writes what
// the peer reads, bounds a write to a peer that reads nothing by its deadline, and ends a
// read that waits as it closes; its descriptor is closed once, and the net.Conn it came from
// at once.
func TestFDConn(t *testing.T) {
	before := openFDs(t)
	fc, cli := fdPair(t)
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 16)
		n, err := fc.Read(b)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(b[:n])
	}()
	time.Sleep(20 * time.Millisecond) // the read waits on the poller
	if _, err := cli.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "hello" {
		t.Fatalf("read %q", s)
	}
	if _, err := fc.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	_ = cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(cli, b); err != nil || string(b) != "world" {
		t.Fatalf("the peer read %q, %v", b, err)
	}
	// A peer that reads nothing: the write waits until its deadline.
	_ = fc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	var ne net.Error
	if _, err := fc.Write(make([]byte, 64<<20)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a write past its deadline: %v", err)
	}
	// A read waiting as the socket closes ends.
	read := make(chan error, 1)
	go func() {
		_, err := fc.Read(make([]byte, 1))
		read <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := fc.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("the waiting read: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing did not end the waiting read")
	}
	if err := fc.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a second Close: %v", err)
	}
	if _, err := fc.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a write after Close: %v", err)
	}
	// The peer sees the socket end: its duplicate was the last descriptor of it.
	_ = cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, cli); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the socket stayed open")
		}
	}
	cli.Close()
	if after := openFDs(t); after > before {
		t.Fatalf("%d descriptors open after, %d before", after, before)
	}
}
