// Package poller waits for many sockets on one epoll loop, so that an idle connection costs
// no goroutine and a socket no runtime bookkeeping: a reader with nothing to read parks
// (Conn.Park: its goroutine returns, and the loop calls it back when the socket is readable or
// closes), and a TCP socket can be served by its descriptor alone (Own), its reads and writes
// waiting on the same loop rather than on the Go runtime's poller.
//
// Entry points: New makes a Poller, whose loop runs while a connection is registered and
// stops with the last; Poller.Conn makes a connection's registration (a value, to be held
// inside the connection), which registers as it first waits; Own gives up a net.Conn for its
// descriptor.
//
// Caveats: Linux only. Elsewhere, and in a build with -tags nopark, nothing parks and Own
// returns the connection as it is; with -tags nofd readers park but sockets stay with net.
// These builds measure what each mechanism saves (docs/benchmarks.md). A registration's
// Close must come before its socket is closed.
package poller
