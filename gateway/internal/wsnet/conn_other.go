//go:build !linux

package wsnet

import (
	"errors"
	"net"
	"syscall"
)

// rawConnOf returns nil: elsewhere than on Linux every write waits, on the
// connection's writer.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

func writeNonblocking(uintptr, []byte) (int, error) { return 0, errors.ErrUnsupported }
