//go:build !nodirect

package wsnet

import (
	"context"

	"github.com/ballet/gateway/rpc"
)

// Direct writes: Transport is an rpc.TryWriter, so a frame for a
// connection whose writer is idle is written by its sender (the fan-out, a
// heartbeat, a handler) with a write that does not wait. A build with
// -tags nodirect leaves this file out, and every frame goes through the
// connection's writer goroutine: the comparison in docs/benchmarks.md.

var _ rpc.TryWriter = (*Transport)(nil)

// TryWrite writes frames if the socket can take them now without anyone
// waiting: nothing is held back for a slow peer. They go out in one write;
// the bytes the socket does not take are sent by the connection's flusher,
// and the next Uncork waits for them. It reports false, having written
// nothing, when it cannot.
func (t *Transport) TryWrite(frames [][]byte) (bool, error) {
	if !t.cork.canTry() {
		return false, nil
	}
	n := 0
	for _, f := range frames {
		n += len(f) + maxFrameHeader
	}
	t.cork.corkFor(n)
	var err error
	for _, f := range frames {
		if err = t.ws.Write(context.Background(), t.typ(), f); err != nil {
			break
		}
	}
	if uerr := t.cork.Uncork(); err == nil {
		err = uerr
	}
	return true, err
}
