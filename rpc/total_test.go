package rpc

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/ballet/gateway/codec"
)

// TestTotalSumsWhatConnectionsQueue: connections whose peer does not read queue what is
// sent to them; their Total holds the sum (within TotalStep each), calls over once as it
// passes its limit, and returns to zero when they end.
func TestTotalSumsWhatConnectionsQueue(t *testing.T) {
	const conns, frames, size = 4, 40, 4 << 10
	var overs atomic.Int32
	total := NewTotal(conns*frames*size/2, func() { overs.Add(1) })
	var cs []*Conn
	for range conns {
		a, _ := NewPipe(0) // the other end never reads: the writer waits on its first frame
		c := NewConn(a, codec.JSON, &Options{Total: total})
		c.Start(context.Background())
		cs = append(cs, c)
	}
	frame := make([]byte, size)
	for _, c := range cs {
		for range frames {
			if !c.TrySend(frame, nil) {
				t.Fatal("TrySend refused a frame")
			}
		}
	}
	var queued int64
	for _, c := range cs {
		queued += c.QueuedBytes()
	}
	if got := total.Bytes(); got > queued || got < queued-conns*TotalStep {
		t.Fatalf("Total.Bytes = %d, want within %d below the %d queued", got, conns*TotalStep, queued)
	}
	if n := overs.Load(); n != 1 {
		t.Fatalf("over called %d times as the sum passed its limit once (%d bytes, limit %d), want 1", n, total.Bytes(), total.Limit())
	}
	for _, c := range cs {
		c.Close()
	}
	if got := total.Bytes(); got != 0 {
		t.Fatalf("Total.Bytes = %d after every connection ended, want 0", got)
	}
}
