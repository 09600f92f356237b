//go:build linux && !nopark && nofd

package poller

import "net"

// A build with -tags nofd leaves fdconn_linux.go out: every socket is served by net and the
// Go runtime's poller, parked readers or not (what serving the descriptor saves:
// docs/benchmarks.md).
func Own(c net.Conn, _ *Poller, _ *Conn) (net.Conn, bool) { return c, false }
