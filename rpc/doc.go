// Package rpc is a JSON-RPC 2.0 connection over any message transport, as
// the realtime API uses it: symmetric (either side sends requests and
// notifications), notifications processed strictly in order, requests
// processed concurrently up to a bound, responses matched by id, and every
// in-flight call cancelled when the connection ends.
//
// Entry points: NewConn wraps a Transport and a codec.Codec; Handler serves
// incoming requests and notifications; Conn.Call, Conn.Notify, Conn.TrySend
// and Conn.TrySendFrames push frames into the connection's queue, and
// Conn.Ready hands the writer a Source whose frames it pulls as the transport
// takes them (a subscription whose events wait in a shared window). Errors are *Error values, or any Coded error
// (the realtime API's codes are package protocol's), that match by code, so
// handlers return fmt.Errorf("...: %w", ErrInvalidParams) or
// Errorf(protocol.ErrNotFound, "..."); rpc names only JSON-RPC's own codes.
// Files by concern: conn.go (life), read.go (the reader), dispatch.go
// (handlers, responses, calls), write.go (queues and the writer role), pull.go (sources the writer pulls),
// params.go (decoding params), workers.go (the loops' goroutines).
//
// Caveat: Transport.Read must return when its context is cancelled, or,
// when the transport is an io.Closer, once the Conn closes it as it ends;
// Close relies on that to stop the reader.
package rpc
