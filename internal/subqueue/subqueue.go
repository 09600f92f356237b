package subqueue

import "sync/atomic"

// Queue counts a subscription's frames that its connection holds unwritten, up to a bound.
// Its state is one word changed atomically, the count and whether it is closed, so that
// reserving room, a frame written on the connection's goroutine and Close need no lock.
// Use it by pointer: Init (or New) binds Written to it.
type Queue struct {
	// limit is the most frames queued at once, set once by Init; zero means none.
	limit int64
	// state is the frames queued, plus closedBit once closed.
	state atomic.Int64
	// written is bound once so that queuing a frame does not allocate a closure.
	written func()
}

// closedBit marks a closed queue's state; the count stays in the bits below it.
const closedBit = 1 << 62

// New returns an open queue of at most limit frames.
func New(limit int) *Queue {
	q := new(Queue)
	q.Init(limit)
	return q
}

// Init readies q, open and empty, for at most limit frames (zero or less: none); q must
// not be in use.
func (q *Queue) Init(limit int) {
	q.limit = int64(max(limit, 0))
	q.state.Store(0)
	q.written = q.frameWritten
}

// Reserve claims room for n frames about to be handed to the connection, all or none. It
// returns the room there was before (what the connection may be told is the queue's own
// bound) and false, claiming nothing, when the queue is closed or has room for fewer than n.
// A claim the connection then refuses is given back with Unreserve.
func (q *Queue) Reserve(n int) (room int, ok bool) {
	for {
		st := q.state.Load()
		if st&closedBit != 0 {
			return 0, false
		}
		r := q.limit - st
		if int64(n) > r {
			return int(r), false
		}
		if q.state.CompareAndSwap(st, st+int64(n)) {
			return int(r), true
		}
	}
}

// Unreserve gives back room for n frames that Reserve claimed and that were not queued.
func (q *Queue) Unreserve(n int) { q.state.Add(-int64(n)) }

// Written returns the function the connection calls once per frame, when it is written or
// dropped; it may run on any goroutine, also while Reserve's caller holds its locks.
func (q *Queue) Written() func() { return q.written }

func (q *Queue) frameWritten() { q.state.Add(-1) }

// Len returns the frames queued.
func (q *Queue) Len() int { return int(q.state.Load() &^ closedBit) }

// Limit returns the most frames queued at once.
func (q *Queue) Limit() int { return int(q.limit) }

// Room returns how many more frames fit now.
func (q *Queue) Room() int { return int(q.limit) - q.Len() }

// Close makes every later Reserve fail; the frames queued still count down
// as they are written. It reports whether q was open.
func (q *Queue) Close() bool {
	for {
		st := q.state.Load()
		if st&closedBit != 0 {
			return false
		}
		if q.state.CompareAndSwap(st, st|closedBit) {
			return true
		}
	}
}

// Closed reports whether Close was called.
func (q *Queue) Closed() bool { return q.state.Load()&closedBit != 0 }
