//go:build !linux || nopark

package wsnet

import (
	"net"
	"syscall"
)

// idlePoller parks idle connections on Linux; elsewhere, and in a build
// with -tags nopark (to measure what parking saves: docs/benchmarks.md),
// every connection reads with a goroutine of its own.
type idlePoller struct{}

type pollConn struct{}

func newIdlePoller() *idlePoller { return &idlePoller{} }

func (ip *idlePoller) conn(syscall.RawConn) pollConn { return pollConn{} }

func (pc *pollConn) pollable() bool { return false }

func (pc *pollConn) park(func()) bool { return false }

func (pc *pollConn) stopParking() {}

func (pc *pollConn) close() {}

// own serves every socket through net: nothing here polls descriptors.
func own(c net.Conn, _ *idlePoller, _ *pollConn) (net.Conn, bool) { return c, false }
