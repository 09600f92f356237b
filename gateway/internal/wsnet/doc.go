// Package wsnet is the socket and runtime machinery under the gateway's
// /rpc WebSockets, there so that many connections cost little: small
// buffers, corked writes that never wait for the peer (conn.go), writes
// by the sender when the writer is idle (direct.go), idle readers parked
// on one epoll loop instead of a goroutine each (park_linux.go), frames
// refused at their header (frameguard.go), one timer for every heartbeat.
//
// Entry points: Upgrader.Accept upgrades a request; its Transport is the
// rpc.Transport of the session, its Owner (Attach). Timers runs the
// sessions' heartbeats (timers.go).
//
// Caveats: the connection and parking lean on how coder/websocket buffers
// the reader and writer it gets by hijacking (library_test.go fails the
// day that changes). Each mechanism has an off-switch build, to measure
// what it saves (docs/benchmarks.md): -tags nopark, nodirect, notimerheap;
// make test runs this package's tests in each.
package wsnet
