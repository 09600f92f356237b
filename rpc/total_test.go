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

// TestMaxQueuedBytesOverflowsOnce: a connection whose peer does not read takes frames until
// the next would take its queue past MaxQueuedBytes; that one and every later one is refused,
// and OnOverflow is called once, however many are refused.
func TestMaxQueuedBytesOverflowsOnce(t *testing.T) {
	const size, limit = 1 << 10, 16 << 10
	overs := make(chan struct{}, 8)
	a, _ := NewPipe(0) // the other end never reads
	c := NewConn(a, codec.JSON, &Options{
		MaxQueuedBytes: limit,
		Hooks:          &hookFuncs{over: func() { overs <- struct{}{} }},
	})
	c.Start(context.Background())
	defer c.Close()
	frame := make([]byte, size)
	taken := 0
	for c.TrySend(frame, nil) {
		taken++
		if taken > limit/size {
			t.Fatalf("%d frames of %d bytes taken under a bound of %d bytes", taken, size, limit)
		}
	}
	if taken == 0 {
		t.Fatal("no frame taken into an empty queue")
	}
	for range 10 {
		if c.TrySend(frame, nil) {
			t.Fatal("a frame taken past MaxQueuedBytes")
		}
	}
	if got := c.QueuedBytes(); got > limit {
		t.Fatalf("QueuedBytes = %d, over the bound %d", got, limit)
	}
	<-overs // called on a goroutine of its own: wait for it
	c.Close()
	if n := len(overs); n != 0 {
		t.Fatalf("OnOverflow called %d more times, want once in all", n)
	}
}
