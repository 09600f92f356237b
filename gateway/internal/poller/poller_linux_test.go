//go:build linux && !nopark

package poller

import (
	"net"
	"testing"
	"time"
)

// tcpPair is a connected loopback pair: the server side and the client side. The kernel
// completes the connection before Accept, which therefore does not wait.
func tcpPair(t *testing.T) (*net.TCPConn, net.Conn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	srv, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, cli
}

// resumed waits for ch to be closed, failing the test after a generous deadline.
func resumed(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the parked reader was not resumed", what)
	}
}

// A parked reader is resumed once its socket is readable, not before; StopParking resumes a
// parked one and refuses later parking; Close resumes one and stops the loop with the last
// registration (TestMain fails on a loop left running).
func TestParkResumes(t *testing.T) {
	ip := New()
	srv, cli := tcpPair(t)
	rc, err := srv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	pc := ip.Conn(rc)
	if !pc.Pollable() {
		t.Fatal("a TCP socket is not pollable")
	}
	ch := make(chan struct{})
	if !pc.Park(func() { close(ch) }) {
		t.Fatal("Park refused")
	}
	select {
	case <-ch:
		t.Fatal("resumed with nothing to read")
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := cli.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	resumed(t, ch, "a byte arrived")

	ch = make(chan struct{})
	srv2, _ := tcpPair(t)
	rc2, err := srv2.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	pc2 := ip.Conn(rc2)
	if !pc2.Park(func() { close(ch) }) {
		t.Fatal("Park refused")
	}
	pc2.StopParking()
	resumed(t, ch, "StopParking")
	if pc2.Park(func() {}) {
		t.Fatal("parked after StopParking")
	}

	ch = make(chan struct{}) // the byte is still unread: park as it is consumed
	if _, err := srv.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if !pc.Park(func() { close(ch) }) {
		t.Fatal("Park refused")
	}
	pc.Close()
	resumed(t, ch, "Close")
	pc2.Close()
	pc2.Close() // a second Close does nothing
}
