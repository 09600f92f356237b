package rpc

import "sync"

// Source is a subscription whose frames the writer pulls when the transport can take more,
// instead of having them queued: what waits for a slow peer is a position in its source, not
// frames. Notification is the method and subscription id of its frames (built as a Frame's
// Params are); Pull appends to params the next frames' params, about max bytes of them (at
// least one when it has any), and reports whether it has more.
type Source interface {
	Notification() (method, sub string)
	Pull(params [][]byte, max int) ([][]byte, bool)
}

// PullChunk is about the most bytes of frames the writer pulls from its sources for one
// write: what a peer that stops reading holds of them, beside its socket's buffer.
const PullChunk = 64 << 10

// Ready tells the writer that src has frames to pull. The writer pulls the ready sources in
// turn, a part of PullChunk each, after the frames queued before, until each reports no
// more; the caller must not call Ready again for src until then. When no writer runs and
// the transport is a TryWriter, the first chunk goes out at once on the caller's goroutine.
// On an ended connection it does nothing.
func (c *Conn) Ready(src Source) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.ready = append(c.ready, src)
	if c.writer != writerIdle {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	if d, ok := c.t.(Drainer); c.tw != nil && len(c.queue) == 0 && (!ok || !d.Busy()) {
		c.setWriterLocked(writerDirect)
		c.mu.Unlock()
		c.pullChunk()
		c.mu.Lock()
		fs := c.queue
		c.queue = nil
		if len(fs) == 0 {
			handOff := c.handOffLocked()
			c.mu.Unlock()
			if handOff {
				c.workers.run(c.writeLoop)
			}
			return
		}
		c.mu.Unlock()
		c.writeNow(fs)
		putPulled(fs) // writeNow keeps none of them: written, or copied to the queue
		return
	}
	c.setWriterLocked(writerQueued)
	c.mu.Unlock()
	c.workers.run(c.writeLoop)
}

// pulled is pullChunk's scratch space.
type pulled struct {
	params  [][]byte
	sources []Source
}

var pulls = sync.Pool{New: func() any { return new(pulled) }}

// pulledFrames are arrays for the frames of a chunk, so that a chunk pulled on a dispatch's
// goroutine, to a connection that keeps no spare batch while idle, does not grow a new one.
var pulledFrames = sync.Pool{New: func() any { s := make([]outFrame, 0, 64); return &s }}

func getPulled() []outFrame {
	p := pulledFrames.Get().(*[]outFrame)
	fs := *p
	*p = nil
	pulledHeaders.Put(p)
	return fs[:0]
}

// putPulled gives back an array of frames no one holds.
func putPulled(fs []outFrame) {
	if cap(fs) == 0 || cap(fs) > 1024 {
		return
	}
	clear(fs[:cap(fs)])
	p, _ := pulledHeaders.Get().(*[]outFrame)
	if p == nil {
		p = new([]outFrame)
	}
	*p = fs[:0]
	pulledFrames.Put(p)
}

// pulledHeaders keeps the pointers pulledFrames holds its arrays by, emptied.
var pulledHeaders sync.Pool

// pullChunk pulls about PullChunk bytes of frames from the ready sources, in turn, onto the
// queue. The caller holds the writer role, so nothing else is queued meanwhile but by
// senders, behind.
func (c *Conn) pullChunk() {
	p := pulls.Get().(*pulled)
	c.mu.Lock()
	p.sources = append(p.sources[:0], c.ready...)
	clear(c.ready)
	c.ready = c.ready[:0]
	// The frames go in the writer's spare batch when it has one: a connection that pulls
	// chunk after chunk reuses two arrays of frames rather than growing one a chunk.
	fs := c.spare[:0]
	c.spare = nil
	c.mu.Unlock()
	if fs == nil {
		fs = getPulled()
	}
	budget := PullChunk
	share := max(PullChunk/len(p.sources), 4<<10)
	var more, unvisited []Source
	for i, src := range p.sources {
		if budget <= 0 {
			unvisited = p.sources[i:]
			break
		}
		method, sub := src.Notification()
		var has bool
		p.params, has = src.Pull(p.params[:0], min(share, budget))
		for _, b := range p.params {
			fs = append(fs, outFrame{Frame: Frame{Method: method, Sub: sub, Params: b}, pulled: true})
			budget -= len(b) + len(method) + len(sub) + spliceRoom
		}
		if has {
			more = append(more, src)
		}
	}
	// The sources not reached go first next time, then the ones that have more.
	var again []Source
	if len(unvisited)+len(more) > 0 {
		again = append(append(make([]Source, 0, len(unvisited)+len(more)), unvisited...), more...)
	}
	clear(p.params)
	clear(p.sources)
	p.params, p.sources = p.params[:0], p.sources[:0]
	pulls.Put(p)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	// Sources woken meanwhile queue behind the ones that have more.
	if len(again) > 0 {
		c.ready = append(again, c.ready...)
	}
	switch {
	case len(fs) == 0:
		putPulled(fs)
	case len(c.queue) == 0:
		c.queue = fs
	default:
		c.queue = append(fs, c.queue...)
	}
	c.mu.Unlock()
}
