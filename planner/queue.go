package planner

import "sync"

// minQueue is the fewest slots a queue that held outputs keeps: a watch that keeps up
// reuses them instead of allocating for each output.
const minQueue = 4

// outputQueue holds the outputs waiting for a watch's goroutine, in order. Its ring grows
// with the outputs waiting, up to the bound, and shrinks as they are taken: an idle watch
// holds no slot. Any number of goroutines may put; one takes.
type outputQueue struct {
	mu     sync.Mutex
	cond   sync.Cond // wait waits on it; its L is &mu, set by the queue's owner
	buf    []Output  // the ring; nil until the first output
	head   int       // buf[head] is the oldest output
	n      int       // outputs in the ring
	closed bool
}

// put adds o unless bound outputs are waiting already (then it reports false). After close
// it does nothing.
func (q *outputQueue) put(o Output, bound int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return true
	case q.n >= bound:
		return false
	case q.n == len(q.buf):
		q.resize(min(max(minQueue, 2*len(q.buf)), bound))
	}
	q.buf[(q.head+q.n)%len(q.buf)] = o
	q.n++
	q.cond.Signal()
	return true
}

// close makes wait report false once the queue is empty; with discard, it is emptied now.
func (q *outputQueue) close(discard bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if discard {
		q.buf, q.head, q.n = nil, 0, 0
	}
	q.cond.Signal()
}

// wait waits until an output is queued or the queue is closed, and reports whether one is
// there. It is apart from take so that a goroutine waiting holds no Output on its stack:
// an idle watch's stays at the 2 KiB it starts with (with take's frame it grew to 4 KiB).
func (q *outputQueue) wait() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n == 0 && !q.closed {
		q.cond.Wait()
	}
	return q.n > 0
}

// take returns the oldest output, if any, without waiting.
func (q *outputQueue) take() (Output, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return Output{}, false
	}
	o := q.buf[q.head]
	q.buf[q.head] = Output{} // what it refers to is the caller's now
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	if len(q.buf) > minQueue && q.n <= len(q.buf)/4 {
		q.resize(max(minQueue, len(q.buf)/2))
	}
	return o, true
}

// resize moves the waiting outputs to a ring of size slots (at least q.n).
func (q *outputQueue) resize(size int) {
	buf := make([]Output, size)
	k := copy(buf, q.buf[q.head:min(q.head+q.n, len(q.buf))])
	copy(buf[k:q.n], q.buf)
	q.buf, q.head = buf, 0
}
