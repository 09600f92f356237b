//go:build linux && !nopark && !nofd

package poller

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// fdConn is a TCP socket served by its descriptor alone, waiting for it on the
// Poller's epoll loop rather than on the Go runtime's: a socket the runtime polls costs
// a pollDesc of 512 bytes outside the heap, a netFD, its finalizer and two addresses, about
// 0.9 KB of memory an idle connection need not hold. Hijack's connection is given up for a
// duplicate of its descriptor (Own). Reads and writes do not wait in the kernel: one that
// finds the socket not ready waits for the poller to report it ready.
//
// A use of the descriptor holds a reference, so that Close never closes it under a system
// call (the number could be reused by another socket): the descriptor is closed when the
// last reference goes, after Close dropped the connection's own.
type fdConn struct {
	fd    int
	refs  atomic.Int64 // uses of fd, plus one until Close; closingBit once Close ran
	pc    *Conn        // the connection's registration: where reads and writes wait
	peer  netip.AddrPort
	rdl   atomic.Int64 // read deadline, Unix ns; 0 for none
	wdl   atomic.Int64 // write deadline
	local netip.AddrPort
}

const closingBit = 1 << 62

var (
	_ net.Conn     = (*fdConn)(nil)
	_ syscall.Conn = (*fdConn)(nil)
)

// Own returns a connection serving c's socket by its descriptor, waiting on pc (ip's
// registration, once made), having closed c, and true; or c itself and false when its socket
// cannot be served so (not TCP, or the descriptor not duplicated). c's wrapper, when it has
// one (a listener's accounting, which has Detach), keeps wrapping it.
func Own(c net.Conn, ip *Poller, pc *Conn) (net.Conn, bool) {
	if ip == nil {
		return c, false
	}
	if d, ok := c.(interface {
		Detach(func(net.Conn) (net.Conn, bool)) bool
	}); ok {
		return c, d.Detach(func(inner net.Conn) (net.Conn, bool) { return ownTCP(inner, pc) })
	}
	return ownTCP(c, pc)
}

// ownTCP is Own for c, a *net.TCPConn.
func ownTCP(c net.Conn, pc *Conn) (net.Conn, bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c, false
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) {
		fd, _, derr = dupNonblocking(int(s))
	}); err != nil || derr != nil {
		return c, false
	}
	fc := &fdConn{fd: fd, pc: pc}
	fc.refs.Store(1)
	if a, ok := tc.RemoteAddr().(*net.TCPAddr); ok {
		fc.peer = a.AddrPort()
	}
	if a, ok := tc.LocalAddr().(*net.TCPAddr); ok {
		fc.local = a.AddrPort()
	}
	_ = tc.Close() // the duplicate keeps the socket open
	return fc, true
}

// dupNonblocking duplicates fd, close-on-exec and non-blocking.
func dupNonblocking(fd int) (int, uintptr, error) {
	nfd, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, 0, e
	}
	if err := syscall.SetNonblock(int(nfd), true); err != nil {
		_ = syscall.Close(int(nfd))
		return -1, 0, err
	}
	return int(nfd), 0, nil
}

// acquire takes a reference to use fd; false once Close ran.
func (c *fdConn) acquire() bool {
	for {
		r := c.refs.Load()
		if r&closingBit != 0 {
			return false
		}
		if c.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release drops a reference; the last one closes fd.
func (c *fdConn) release() {
	if c.refs.Add(-1) == closingBit {
		_ = syscall.Close(c.fd)
	}
}

// Close wakes what waits on the socket and closes it once no system call uses it.
func (c *fdConn) Close() error {
	for {
		r := c.refs.Load()
		if r&closingBit != 0 {
			return net.ErrClosed
		}
		if c.refs.CompareAndSwap(r, r|closingBit) {
			break
		}
	}
	c.pc.Close()
	c.release() // the connection's own reference
	return nil
}

// CloseWrite shuts the socket for writing: the peer reads the end of the stream.
func (c *fdConn) CloseWrite() error {
	if !c.acquire() {
		return net.ErrClosed
	}
	defer c.release()
	return c.opError("shutdown", syscall.Shutdown(c.fd, syscall.SHUT_WR))
}

// Read reads into p, waiting for the socket when it has nothing.
func (c *fdConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if !c.acquire() {
			return 0, net.ErrClosed
		}
		n, err := syscall.Read(c.fd, p)
		c.release()
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			if err := c.wait(false); err != nil {
				return 0, err
			}
			continue
		case err != nil:
			return 0, c.opError("read", err)
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Write writes all of p, waiting for the socket while it takes no more.
func (c *fdConn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		if !c.acquire() {
			return done, net.ErrClosed
		}
		n, err := syscall.Write(c.fd, p[done:])
		c.release()
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			if err := c.wait(true); err != nil {
				return done, err
			}
			continue
		case err != nil:
			return done, c.opError("write", err)
		}
		done += n
	}
	return done, nil
}

// errTimeout is a read or write past its deadline: a net.Error whose Timeout is true.
var errTimeout = &net.OpError{Op: "wait", Net: "tcp", Err: os.ErrDeadlineExceeded}

// wait waits until the socket is ready to write (else to read), it is closed, or the
// deadline passes.
func (c *fdConn) wait(write bool) error {
	dl := c.rdl.Load()
	if write {
		dl = c.wdl.Load()
	}
	if dl != 0 && time.Now().UnixNano() >= dl {
		return errTimeout
	}
	ready := make(chan struct{})
	if !c.pc.await(write, func() { close(ready) }) {
		return net.ErrClosed
	}
	if dl == 0 {
		<-ready
		return nil
	}
	t := time.NewTimer(time.Duration(dl - time.Now().UnixNano()))
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case <-t.C:
		return errTimeout
	}
}

func (c *fdConn) opError(op string, err error) error {
	if err == nil {
		return nil
	}
	return &net.OpError{Op: op, Net: "tcp", Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, err)}
}

// LocalAddr is the socket's address.
func (c *fdConn) LocalAddr() net.Addr { return net.TCPAddrFromAddrPort(c.local) }

// RemoteAddr is the peer's address.
func (c *fdConn) RemoteAddr() net.Addr { return net.TCPAddrFromAddrPort(c.peer) }

func deadline(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// SetDeadline sets both deadlines. A deadline bounds the waits that begin after it is set.
func (c *fdConn) SetDeadline(t time.Time) error {
	c.rdl.Store(deadline(t))
	c.wdl.Store(deadline(t))
	return nil
}

func (c *fdConn) SetReadDeadline(t time.Time) error  { c.rdl.Store(deadline(t)); return nil }
func (c *fdConn) SetWriteDeadline(t time.Time) error { c.wdl.Store(deadline(t)); return nil }

// SyscallConn gives the descriptor, for writes that do not wait and for the poller.
func (c *fdConn) SyscallConn() (syscall.RawConn, error) { return (*fdRaw)(c), nil }

// fdRaw is an fdConn's syscall.RawConn: each call holds a reference to the descriptor.
type fdRaw fdConn

var errRawClosed = errors.New("poller: the connection is closed")

func (r *fdRaw) Control(f func(fd uintptr)) error {
	c := (*fdConn)(r)
	if !c.acquire() {
		return errRawClosed
	}
	defer c.release()
	f(uintptr(c.fd))
	return nil
}

func (r *fdRaw) Read(f func(fd uintptr) bool) error  { return r.do(false, f) }
func (r *fdRaw) Write(f func(fd uintptr) bool) error { return r.do(true, f) }

// do calls f until it reports done, waiting for the socket between calls.
func (r *fdRaw) do(write bool, f func(fd uintptr) bool) error {
	c := (*fdConn)(r)
	for {
		if !c.acquire() {
			return errRawClosed
		}
		done := f(uintptr(c.fd))
		c.release()
		if done {
			return nil
		}
		if err := c.wait(write); err != nil {
			return err
		}
	}
}
