//go:build !nodirect

package wsnet

import (
	"github.com/ballet/gateway/rpc"
)

// Direct writes: Transport is an rpc.TryWriter, so a frame for a
// connection whose writer is idle is written by its sender (the fan-out, a
// heartbeat, a handler) with a write that does not wait. A build with
// -tags nodirect leaves this file out, and every frame goes through the
// connection's writer goroutine: the comparison in docs/benchmarks.md.

var _ rpc.TryWriter = (*Transport)(nil)

// TryWrite writes frames if the socket can take them now without anyone
// waiting: nothing is held back for a slow peer. They go out in one
// vectored write, framed here, the frames as they are; the bytes the socket
// does not take are sent by the connection's flusher, and the next Uncork
// waits for them. It reports false, having written nothing, when it cannot
// (also once the close frame has gone: the rpc connection's writer goroutine then fails).
func (t *Transport) TryWrite(frames []rpc.Out) (bool, error) {
	return t.w.tryFrames(t.framing(), frames)
}

// tryFrames is TryWrite on the connection.
func (c *writer) tryFrames(fr framing, frames []rpc.Out) (bool, error) {
	if c.raw == nil {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flushing || c.corked || c.werr != nil || c.closed {
		return false, nil
	}
	return true, c.sendFramesLocked(fr, frames)
}
