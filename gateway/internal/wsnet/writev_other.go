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

// vectored is nothing here: trySendv is not called.
type vectored struct{}

// trySendv is not called: without a raw connection every write waits.
func (*writer) trySendv(*gather) (int, error) { return 0, errors.ErrUnsupported }

// sendvWait is not called: without a raw connection every write waits.
func (*writer) sendvWait(*gather) (int, error) { return 0, errors.ErrUnsupported }
