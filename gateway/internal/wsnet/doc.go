// Package wsnet is the gateway's /rpc WebSocket (RFC 6455, server side), built so that many
// connections cost little. The opening handshake is accept.go and handshake.go. A Transport
// is the connection: it composes a read side and a write side and runs the closing handshake
// over both (close.go). The read side, a reader, takes the peer's bytes through a pooled buffer
// and cuts them into frames (reader.go), their payloads taken as the bytes arrive
// (payload.go); the Transport makes messages of them, refusing a frame at its header where
// the header is enough (read.go). The write side, a writer, owns the socket: corked writes
// that never wait for the peer (write.go, send.go), frames built without copies and sent in
// one vectored write (frames.go, writev_linux.go), and writes by the sender when the writer is
// idle (direct.go). Frame headers, masking and close payloads are package wsframe's; idle
// readers park, and sockets are served by their descriptor, on package poller's epoll loop.
// An idle connection holds no buffer.
//
// The same Transport carries a POST /rpc's streamed response (stream.go): Upgrader.Stream takes
// over the request's socket, and the writer frames each message as a chunk holding one NDJSON
// line or one Server-Sent Event, with everything else (vectored writes, the flusher, the bounds
// of a peer that does not read, parking) as a WebSocket's.
//
// Entry points: Upgrader.Accept upgrades a request, Upgrader.Stream streams one's response; the
// Transport is the rpc.Transport of the session, its Owner (Attach). Close codes are coder/websocket's StatusCode, the type the Go
// client uses.
//
// Caveats: no extension (permessage-deflate) is negotiated. A socket is served by its
// descriptor only on Linux, with parking; elsewhere, and under -tags nopark or nofd, through
// net. Each mechanism has an off-switch build, to measure what it saves (docs/benchmarks.md):
// -tags nopark, nofd (package poller), nodirect (direct.go); make test runs this package's
// tests in each.
package wsnet
