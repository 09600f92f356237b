package rpc

import "sync/atomic"

// TotalStep is how far a connection's queued bytes move before it tells its Total: Bytes
// is within TotalStep of the exact sum for each connection, and a frame smaller than it
// that is written at once costs no shared write.
const TotalStep = 16 << 10

// Total sums the bytes queued and not yet written by every Conn made with it
// (Options.Total): what a server holds for its peers together.
type Total struct {
	limit int64
	sum   atomic.Int64
	over  func()
}

// NewTotal returns a Total that calls over each time the sum goes from at most limit
// bytes to beyond it (limit 0 or over nil: never). over runs on the goroutine of the
// sender whose frame took the sum past limit, with that connection's lock held: it must
// return at once, and must not send on a connection.
func NewTotal(limit int64, over func()) *Total {
	return &Total{limit: limit, over: over}
}

// Bytes is the sum the connections have told.
func (t *Total) Bytes() int64 { return t.sum.Load() }

// Limit is the bytes past which over is called.
func (t *Total) Limit() int64 { return t.limit }

func (t *Total) add(d int64) {
	s := t.sum.Add(d)
	if t.over != nil && t.limit > 0 && d > 0 && s > t.limit && s-d <= t.limit {
		t.over()
	}
}

// tellLocked tells c.total what c.bytes has become, once it moved TotalStep from what it
// was told or the queue is empty. c.mu is held.
func (c *Conn) tellLocked() {
	if c.total == nil {
		return
	}
	d := c.bytes - c.told
	if d >= TotalStep || d <= -TotalStep || (c.bytes == 0 && d != 0) {
		c.told = c.bytes
		c.total.add(d)
	}
}

// Shed finishes, unsent, the frames queued and not yet taken by the writer, and refuses
// every frame sent from now on (Flush still works): for a connection being closed because
// its peer fell behind, whose queue the peer would never read. Frames the writer is
// writing stay until written or until the connection ends.
func (c *Conn) Shed() {
	c.mu.Lock()
	q := c.queue
	c.queue = nil
	c.shed = true
	c.mu.Unlock()
	for _, f := range q {
		c.finish(f)
	}
}
