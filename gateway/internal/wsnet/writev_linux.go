package wsnet

import (
	"net"
	"syscall"
	"unsafe"
)

// rawConnOf returns c's raw connection for writes that do not wait, or nil.
func rawConnOf(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// vectored is a gather's state for trySendv: its vector and the write function given to the
// raw connection, made once for the pooled gather rather than once a write.
type vectored struct {
	iov    []syscall.Iovec
	n      int
	err    error
	fn     func(fd uintptr) bool
	waitFn func(fd uintptr) bool
}

func (v *vectored) write(fd uintptr) bool {
	v.n, v.err = writevNonblocking(fd, v.iov)
	return true
}

// writeOrWait is write, but asks the raw connection to wait for the socket, and call it
// again, while the socket takes nothing.
func (v *vectored) writeOrWait(fd uintptr) bool {
	v.n, v.err = writevNonblocking(fd, v.iov)
	return v.err != syscall.EAGAIN
}

// trySendv writes as much of g's pieces, in order, as the socket takes now, in one writev.
func (c *writer) trySendv(g *gather) (int, error) {
	v := &g.vectored
	if v.fn == nil {
		v.fn = v.write
	}
	return c.sendv(g, v.fn)
}

// sendvWait writes as much of g's pieces, in order, as the socket takes in one writev, waiting
// for the socket while it takes nothing (until the connection's write deadline).
func (c *writer) sendvWait(g *gather) (int, error) {
	v := &g.vectored
	if v.waitFn == nil {
		v.waitFn = v.writeOrWait
	}
	return c.sendv(g, v.waitFn)
}

// sendv is one writev of g's pieces through fn.
func (c *writer) sendv(g *gather, fn func(fd uintptr) bool) (int, error) {
	v := &g.vectored
	v.iov = v.iov[:0]
	for _, p := range g.parts {
		iv := syscall.Iovec{Base: unsafe.SliceData(p)}
		iv.SetLen(len(p))
		v.iov = append(v.iov, iv)
	}
	rerr := c.raw.Write(fn)
	clear(v.iov) // holds no frame
	n, err := v.n, v.err
	v.n, v.err = 0, nil
	return c.sent(n, err, rerr)
}

// writevNonblocking writes iov to the non-blocking socket fd once; EAGAIN reports that it
// took nothing. The raw call spares the scheduler the bookkeeping of a blocking one: it does
// not wait.
func writevNonblocking(fd uintptr, iov []syscall.Iovec) (int, error) {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
		if e == 0 {
			return int(r), nil
		}
		if e != syscall.EINTR {
			return 0, e
		}
	}
}
