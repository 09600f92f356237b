package rpc

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Frame is one frame for TrySendFrames: Data as encoded, or, when Params
// is set, the notification Method whose params are the encoded object
// Params with "subscription": Sub added (codec.Splice). The second kind is
// built when it is written, into a reused buffer, so that one encoded
// body (an event, a planner output) goes to many connections without an
// allocation per connection. Done, when set, is called for the frame
// instead of TrySendFrames' done: frames of several subscriptions can go
// in one call, each counted in its own queue.
type Frame struct {
	Data   []byte
	Method string
	Sub    string
	Params []byte
	Done   func()
}

// outFrame is one queued frame: a Frame, or a Flush marker.
type outFrame struct {
	Frame
	done   func()
	token  bool          // holds an OutQueue token
	try    bool          // counted in tryLen
	pulled bool          // pulled from a Source: counted nowhere
	marker chan struct{} // Flush marker
}

var scratchBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// send queues a frame, waiting for space in the bounded out queue.
func (c *Conn) send(ctx context.Context, frame []byte) error {
	if err := c.takeSpace(ctx); err != nil {
		return err
	}
	if !c.enqueue([]outFrame{{Frame: Frame{Data: frame}, token: true}}, false, 1) {
		c.giveSpace()
		return ErrClosed
	}
	return nil
}

// takeSpace takes one of the OutQueue tokens, waiting while none is free.
func (c *Conn) takeSpace(ctx context.Context) error {
	for {
		c.mu.Lock()
		if c.used < c.outQueue {
			c.used++
			c.mu.Unlock()
			return nil
		}
		if c.freed == nil {
			c.freed = make(chan struct{})
		}
		freed := c.freed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ctx.Done():
			return ErrClosed
		}
	}
}

// giveSpace returns a token and wakes the senders waiting for one.
func (c *Conn) giveSpace() {
	c.mu.Lock()
	c.used--
	if c.freed != nil {
		close(c.freed)
		c.freed = nil
	}
	c.mu.Unlock()
}

// TrySend queues an already encoded frame without waiting. It returns false
// when the connection has ended or MaxTrySend frames are already queued by
// TrySend. done, when non-nil, is called once the frame was written or
// dropped because the connection ended.
func (c *Conn) TrySend(frame []byte, done func()) bool {
	return c.enqueue([]outFrame{{Frame: Frame{Data: frame}, done: done, try: true}}, true, 1)
}

// TrySendFrames is TrySend for several frames, all or none, and none when
// they are more than room (the caller's own queue bound). done is called
// once per frame. When no writer runs and the transport is a TryWriter,
// they go out at once on the caller's goroutine, in one write.
func (c *Conn) TrySendFrames(frames []Frame, room int, done func()) bool {
	if len(frames) == 0 {
		return true
	}
	fs := outFrames.Get().(*[]outFrame)
	for _, f := range frames {
		d := done
		if f.Done != nil {
			d = f.Done
		}
		*fs = append(*fs, outFrame{Frame: f, done: d, try: true})
	}
	ok := c.enqueue(*fs, true, room)
	putFrames(fs)
	return ok
}

var outFrames = sync.Pool{New: func() any { s := make([]outFrame, 0, 8); return &s }}

func putFrames(fs *[]outFrame) {
	if cap(*fs) <= 1024 {
		clear(*fs)
		*fs = (*fs)[:0]
		outFrames.Put(fs)
	}
}

// The writer role: at most one goroutine writes to the transport at a
// time, the one that holds the role (c.writer is not writerIdle, with a count
// of c.wg so that Close waits for it). Frames are written in the order they
// were queued. Under c.mu:
//
//	idle    no writer, queue empty.
//	direct  on a sender's goroutine (writeNow): the sender found the
//	        connection idle and the transport a TryWriter. Frames sent
//	        meanwhile are queued behind the ones being written.
//	queued  on a writer goroutine (writeLoop), which writes the
//	        queue until it is empty, then goes idle.
//
//	idle   → direct  enqueue with a TryWriter and no Flush marker
//	idle   → queued  enqueue otherwise
//	direct → queued  TryWrite declined (its frames go back to the front of
//	                 the queue) or frames were queued meanwhile
//	direct → idle    nothing else queued
//	queued → idle    the queue is empty, or the connection ended (what is
//	                 still queued is finished unsent)
//
// The role passes from direct to queued without being released, so no
// other sender can write in between. The connection's closed is not a
// state of the writer: Close may set it while a writer runs, which then
// ends as above.
type writerState uint8

const (
	writerIdle writerState = iota
	writerDirect
	writerQueued
)

func (w writerState) String() string {
	switch w {
	case writerIdle:
		return "idle"
	case writerDirect:
		return "direct"
	case writerQueued:
		return "queued"
	}
	return fmt.Sprintf("writerState(%d)", uint8(w))
}

// writerMoves is, for each state, the states it may move to: one bit a state.
var writerMoves = [...]uint8{
	writerIdle:   1<<writerDirect | 1<<writerQueued,
	writerDirect: 1<<writerQueued | 1<<writerIdle,
	writerQueued: 1 << writerIdle,
}

// setWriterLocked moves the writer role to to. A move the role does not have, or going idle
// with frames queued, is a bug and panics. c.mu is held.
func (c *Conn) setWriterLocked(to writerState) {
	if from := c.writer; writerMoves[from]&(1<<to) == 0 || (to == writerIdle && (len(c.queue) > 0 || len(c.ready) > 0)) {
		panic(fmt.Sprintf("rpc: writer cannot go from %v to %v with %d frames queued and %d sources ready", from, to, len(c.queue), len(c.ready)))
	}
	c.writer = to
}

// FrameOverhead is what MaxQueuedBytes counts for a queued frame beside its bytes: the
// queue's entry for it.
const FrameOverhead = 64

// frameBytes is what f counts against MaxQueuedBytes.
func frameBytes(f *outFrame) int64 {
	if f.pulled || f.Data == nil && f.Params == nil { // pulled, a Flush marker, or a frame already finished
		return 0
	}
	return int64(len(f.Data)+len(f.Params)+len(f.Method)+len(f.Sub)) + FrameOverhead
}

// enqueue queues fs (copied) in order, or writes them at once; it refuses
// them all when the connection has ended, when try frames would be more
// than MaxTrySend, when they are more than room, or when they would take
// the queue past MaxQueuedBytes (which also reports the overflow).
func (c *Conn) enqueue(fs []outFrame, try bool, room int) bool {
	var b int64
	for i := range fs {
		b += frameBytes(&fs[i])
	}
	c.mu.Lock()
	if c.closed || (c.shed && b > 0) || (try && c.tryLen+len(fs) > c.maxTry) || len(fs) > room {
		c.mu.Unlock()
		return false
	}
	if c.maxBytes > 0 && c.bytes > 0 && c.bytes+b > c.maxBytes {
		first := !c.over
		c.over = true
		c.mu.Unlock()
		if first {
			go c.hooks.OnOverflow()
		}
		return false
	}
	c.bytes += b
	c.tellLocked()
	if try {
		c.tryLen += len(fs)
	}
	if c.writer != writerIdle {
		c.queue = append(c.queue, fs...)
		c.mu.Unlock()
		return true
	}
	c.wg.Add(1)
	if c.tw != nil && fs[0].marker == nil {
		c.setWriterLocked(writerDirect)
		c.mu.Unlock()
		c.writeNow(fs)
		return true
	}
	c.setWriterLocked(writerQueued)
	c.queue = append(c.queue, fs...)
	c.mu.Unlock()
	c.workers.run(c.writeLoop)
	return true
}

// handOffLocked ends the direct state: to a writer goroutine when frames
// are queued (it reports true: the caller must start writeLoop), or to
// idle.
func (c *Conn) handOffLocked() bool {
	if len(c.queue) > 0 || len(c.ready) > 0 {
		c.setWriterLocked(writerQueued)
		return true
	}
	c.setWriterLocked(writerIdle)
	c.wg.Done()
	return false
}

// outs is a batch's messages as the transport sends them: the envelopes spliced one after
// another in data, and the messages, whose Heads are cut from it.
type outs struct {
	data []byte
	ends []int // per message: end of its Head in data
	msgs []Out
}

var outBufs = sync.Pool{New: func() any { return new(outs) }}

const (
	// spliceRoom is what a spliced frame takes beside its params, method and subscription
	// (the envelope's keys and quotes), so that a batch's buffer is sized once; escapes that
	// need more grow it.
	spliceRoom = 64
	// keepBuffer is the largest buffer of envelopes kept for reuse.
	keepBuffer = 64 << 10
)

// spliceSize is about the bytes the frame f's Params make.
func spliceSize(f *outFrame) int {
	return len(f.Params) + len(f.Method) + len(f.Sub) + spliceRoom
}

// build makes o's messages for fs: a notification's envelope spliced into o.data, its params'
// own fields where they are (Keep when pulled from a Source, whose bodies never change), an
// encoded frame as it is. A frame that cannot be made is logged and dropped.
func (c *Conn) build(o *outs, fs []outFrame) {
	need := 0
	for i := range fs {
		if fs[i].Params != nil {
			need += len(fs[i].Method) + len(fs[i].Sub) + spliceRoom
		}
	}
	o.data = slices.Grow(o.data[:0], need)
	o.ends, o.msgs = o.ends[:0], o.msgs[:0]
	for i := range fs {
		f := &fs[i]
		switch {
		case f.Params != nil:
			head, rest, tail, err := c.codec.SpliceHead(o.data, f.Method, f.Sub, f.Params)
			if err != nil {
				c.log.Error("rpc: splice failed", "method", f.Method, "err", err)
				continue
			}
			o.data = head
			o.msgs = append(o.msgs, Out{Body: rest, Tail: tail, Keep: f.pulled})
		case f.Data != nil:
			o.msgs = append(o.msgs, Out{Body: f.Data})
		default:
			continue
		}
		o.ends = append(o.ends, len(o.data))
	}
	start := 0
	for i, end := range o.ends {
		o.msgs[i].Head = o.data[start:end:end]
		start = end
	}
}

// put returns o to the pool, holding no frame.
func (o *outs) put() {
	clear(o.msgs)
	if cap(o.data) <= keepBuffer && cap(o.msgs) <= 1024 {
		o.data, o.ends, o.msgs = o.data[:0], o.ends[:0], o.msgs[:0]
		outBufs.Put(o)
	}
}

// writeNow writes fs on the caller's goroutine if the transport takes them without waiting,
// and otherwise hands them to a writer goroutine. The caller holds the writer role in the
// direct state (see enqueue).
func (c *Conn) writeNow(fs []outFrame) {
	written := false
	var err error
	if c.ctx.Err() == nil {
		o := outBufs.Get().(*outs)
		c.build(o, fs)
		if len(o.msgs) == 0 {
			written = true
		} else {
			written, err = c.tw.TryWrite(o.msgs)
		}
		o.put()
	}
	c.mu.Lock()
	if !written {
		// The writer writes them (or drops them, if the connection ended),
		// before anything queued after them.
		q := make([]outFrame, 0, len(fs)+len(c.queue))
		q = append(q, fs...)
		c.queue = append(q, c.queue...)
	}
	handOff := c.handOffLocked()
	c.mu.Unlock()
	if written {
		for i := range fs {
			c.finish(fs[i])
		}
	}
	if err != nil {
		c.fail(fmt.Errorf("rpc: write: %w", err))
	}
	if handOff {
		c.workers.run(c.writeLoop)
	}
}

// QueuedBytes is what MaxQueuedBytes counts now: the frames queued and not yet written.
func (c *Conn) QueuedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Flush waits until every frame queued before it has been written.
func (c *Conn) Flush(ctx context.Context) error {
	marker := make(chan struct{})
	if !c.enqueue([]outFrame{{marker: marker}}, false, 1) {
		return ErrClosed
	}
	select {
	case <-marker:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
}

// writeLoop is the writer role's queued state: it writes queued frames
// until the queue is empty, then exits; the next enqueue starts it again. Each batch is corked into one write when the
// transport is a Batcher.
func (c *Conn) writeLoop() {
	defer c.wg.Done()
	batcher, _ := c.t.(Batcher)
	// A writer runs only while frames are queued: its splice buffer comes
	// from a pool rather than being made anew each time.
	sp := scratchBufs.Get().(*[]byte)
	scratch := (*sp)[:0]
	defer func() {
		if cap(scratch) <= 64<<10 {
			*sp = scratch[:0]
			scratchBufs.Put(sp)
		}
	}()
	for {
		c.mu.Lock()
		if d, ok := c.t.(Drainer); ok && c.ctx.Err() == nil && d.Busy() {
			// The next write, pushed or pulled, is built once the transport has sent what
			// it holds: a peer that stops reading holds back one write, not two.
			c.mu.Unlock()
			if err := d.Drain(); err != nil {
				c.fail(fmt.Errorf("rpc: write: %w", err))
			}
			c.mu.Lock()
		}
		if len(c.queue) == 0 && len(c.ready) > 0 && c.ctx.Err() == nil {
			// Nothing pushed waits: the next chunk of the ready sources.
			c.mu.Unlock()
			c.pullChunk()
			c.mu.Lock()
		}
		if len(c.queue) == 0 && len(c.ready) == 0 || c.ctx.Err() != nil {
			rest := c.queue
			// An idle connection keeps no queue: the next enqueue makes one.
			putPulled(c.spare)
			c.queue, c.spare = nil, nil
			if c.ctx.Err() != nil {
				c.closed = true
				clear(c.ready)
				c.ready = nil
			}
			c.setWriterLocked(writerIdle)
			c.mu.Unlock()
			for _, f := range rest {
				c.finish(f)
			}
			return
		}
		batch := c.queue
		c.queue = c.spare[:0]
		c.mu.Unlock()

		err := c.writeBatch(batch, batcher, &scratch)
		for i := range batch {
			if err != nil {
				c.finish(batch[i]) // drops the unwritten rest
			}
			batch[i] = outFrame{}
		}
		c.mu.Lock()
		c.spare = batch[:0]
		c.mu.Unlock()
		if err != nil {
			c.fail(fmt.Errorf("rpc: write: %w", err))
		}
		if cap(scratch) > 64<<10 {
			scratch = (*sp)[:0] // do not keep a large frame's buffer
		}
	}
}

// writeBatch writes the frames of batch in order, finishing each written one.
// On error the written ones are already finished and zeroed.
func (c *Conn) writeBatch(batch []outFrame, batcher Batcher, scratch *[]byte) (err error) {
	if fw, ok := c.t.(FramesWriter); ok {
		o := outBufs.Get().(*outs)
		c.build(o, batch)
		if len(o.msgs) > 0 {
			err = fw.WriteFrames(o.msgs)
		}
		o.put() // the transport keeps none of it: what it holds is its own, or kept bodies
		if err == nil {
			err = fw.Drain()
		}
		if err != nil {
			return err
		}
		for i := range batch {
			c.finish(batch[i])
			batch[i] = outFrame{}
		}
		return nil
	}
	if batcher != nil {
		// Also for one frame: its header and payload go out in one write.
		batcher.Cork()
		defer func() {
			if uerr := batcher.Uncork(); err == nil {
				err = uerr
			}
		}()
	}
	for i := range batch {
		f := &batch[i]
		data := f.Data
		if f.Params != nil {
			var ok bool
			if *scratch, ok = c.splice((*scratch)[:0], f); ok {
				data = *scratch
			} else {
				data = nil
			}
		}
		if data != nil {
			if err := c.t.Write(c.ctx, data); err != nil {
				return err
			}
		}
		c.finish(*f)
		*f = outFrame{}
	}
	return nil
}

// splice appends to buf the frame f's Params make. One that cannot be made is logged and
// dropped, by the direct path and the writer alike: buf comes back as it was, and false.
func (c *Conn) splice(buf []byte, f *outFrame) ([]byte, bool) {
	out, err := c.codec.Splice(buf, f.Method, f.Sub, f.Params)
	if err != nil {
		c.log.Error("rpc: splice failed", "method", f.Method, "err", err)
		return buf, false
	}
	return out, true
}

func (c *Conn) finish(f outFrame) {
	if f.token {
		c.giveSpace()
	}
	if b := frameBytes(&f); f.try || b > 0 {
		c.mu.Lock()
		if f.try {
			c.tryLen--
		}
		c.bytes -= b
		c.tellLocked()
		c.mu.Unlock()
	}
	if f.done != nil {
		f.done()
	}
	if f.marker != nil {
		close(f.marker)
	}
}
