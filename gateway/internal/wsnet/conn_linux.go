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

// writeNonblocking writes p to the non-blocking socket fd once; EAGAIN
// reports that it took nothing. The raw call spares the scheduler the
// bookkeeping of a blocking one: it does not wait.
func writeNonblocking(fd uintptr, p []byte) (int, error) {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		if e == 0 {
			return int(r), nil
		}
		if e != syscall.EINTR {
			return 0, e
		}
	}
}
