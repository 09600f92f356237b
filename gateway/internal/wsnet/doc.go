// Package wsnet is the gateway's /rpc WebSocket (RFC 6455, server side)
// and the socket and runtime machinery under it, there so that many
// connections cost little: the handshake (accept.go, handshake.go), the
// client's frames read whole and refused at their header (read.go), their
// payloads taken as the bytes arrive (payload.go), the
// server's built without copies (frames.go), the closing handshake
// (close.go), corked writes that never wait for the peer (conn.go), writes
// by the sender when the writer is idle (direct.go), idle readers parked
// on one epoll loop instead of a goroutine each (park_linux.go), sockets
// served by their descriptor on that loop rather than by the Go runtime's
// poller (fdconn_linux.go), one timer for every heartbeat. An idle
// connection holds no buffer.
//
// Entry points: Upgrader.Accept upgrades a request; its Transport is the
// rpc.Transport of the session, its Owner (Attach). Timers runs the
// sessions' heartbeats (timers.go). Close codes are coder/websocket's
// StatusCode, the type the Go client uses.
//
// Caveats: no extension (permessage-deflate) is negotiated. A socket is
// served by its descriptor only on Linux, with parking; elsewhere, and
// under -tags nopark or nofd, through net. Each mechanism has an
// off-switch build, to measure what it saves (docs/benchmarks.md): -tags
// nopark, nofd, nodirect, notimerheap; make test runs this package's tests
// in each.
package wsnet
