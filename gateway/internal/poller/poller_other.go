//go:build !linux || nopark

package poller

import (
	"net"
	"syscall"
)

// Poller parks idle connections on Linux; elsewhere, and in a build
// with -tags nopark (to measure what parking saves: docs/benchmarks.md),
// every connection reads with a goroutine of its own.
type Poller struct{}

// Conn is a connection's registration, which never parks here.
type Conn struct{}

// New returns a Poller that polls nothing.
func New() *Poller { return &Poller{} }

// Conn returns a registration that is not pollable.
func (ip *Poller) Conn(syscall.RawConn) Conn { return Conn{} }

// Pollable reports false: the connection reads with a goroutine.
func (pc *Conn) Pollable() bool { return false }

// Park reports false: the caller reads as usual.
func (pc *Conn) Park(func()) bool { return false }

// StopParking does nothing: nothing parks.
func (pc *Conn) StopParking() {}

// Close does nothing: nothing is registered.
func (pc *Conn) Close() {}

// Own serves every socket through net: nothing here polls descriptors.
func Own(c net.Conn, _ *Poller, _ *Conn) (net.Conn, bool) { return c, false }
