//go:build !linux

package gateway

import "syscall"

// idlePoller parks idle connections on Linux; elsewhere every connection
// reads with a goroutine of its own.
type idlePoller struct{}

type pollConn struct{}

func newIdlePoller() *idlePoller { return &idlePoller{} }

func (ip *idlePoller) conn(syscall.RawConn) *pollConn { return nil }

func (pc *pollConn) park(func()) bool { return false }

func (pc *pollConn) close() {}
