//go:build !notimerheap

package timerheap

import (
	"container/heap"
	"sync"
	"time"
)

// Timers runs the heartbeats of many connections from one timer: a
// min-heap of their due times and a single time.Timer for the earliest. A
// timer of its own per connection would cost every idle connection a
// runtime timer and a closure. A build with -tags notimerheap gives each
// a timer instead (timers_off.go): the comparison in docs/benchmarks.md.
//
// The zero Timers is ready. Schedule and Remove of one value are called
// one at a time (its owner's lock); Heartbeat runs on the timer's
// goroutine, outside Timers' lock, and may call Schedule.
type Timers[B Beater] struct {
	mu      sync.Mutex
	h       timerHeap[B]
	timer   *time.Timer
	armedAt int64 // Unix ns the timer is set for; 0 when stopped
}

// Beater is what Timers schedules: a value (a pointer) with a Timer of its
// own, whose Heartbeat runs when it is due.
type Beater interface {
	HeartbeatTimer() *Timer
	Heartbeat()
}

// Timer is a value's place in Timers (under Timers.mu).
type Timer struct {
	pos int   // 1 + index in the heap; 0 when absent
	due int64 // Unix ns of the next heartbeat
}

// timerHeap orders values by due time; each knows its place (pos) so that
// it can be moved or removed.
type timerHeap[B Beater] []B

func (h timerHeap[B]) Len() int { return len(h) }
func (h timerHeap[B]) Less(i, j int) bool {
	return h[i].HeartbeatTimer().due < h[j].HeartbeatTimer().due
}
func (h timerHeap[B]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].HeartbeatTimer().pos, h[j].HeartbeatTimer().pos = i+1, j+1
}
func (h *timerHeap[B]) Push(x any) {
	b := x.(B)
	*h = append(*h, b)
	b.HeartbeatTimer().pos = len(*h)
}
func (h *timerHeap[B]) Pop() any {
	old := *h
	b := old[len(old)-1]
	var zero B
	old[len(old)-1] = zero
	*h = old[:len(old)-1]
	b.HeartbeatTimer().pos = 0
	return b
}

// Schedule sets b's heartbeat for due (Unix ns), adding or moving it.
func (st *Timers[B]) Schedule(b B, due int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	t := b.HeartbeatTimer()
	t.due = due
	if t.pos > 0 {
		heap.Fix(&st.h, t.pos-1)
	} else {
		heap.Push(&st.h, b)
	}
	st.armLocked()
}

// Remove takes b out, if it is scheduled.
func (st *Timers[B]) Remove(b B) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if t := b.HeartbeatTimer(); t.pos > 0 {
		heap.Remove(&st.h, t.pos-1)
		st.armLocked()
	}
}

// armLocked sets the timer for the earliest due time.
func (st *Timers[B]) armLocked() {
	if len(st.h) == 0 {
		if st.timer != nil && st.armedAt != 0 {
			st.timer.Stop()
			st.armedAt = 0
		}
		return
	}
	due := st.h[0].HeartbeatTimer().due
	if st.armedAt != 0 && st.armedAt <= due {
		return // already set for this or an earlier time
	}
	d := time.Duration(due - time.Now().UnixNano())
	if st.timer == nil {
		st.timer = time.AfterFunc(max(d, 0), st.fire)
	} else {
		st.timer.Reset(max(d, 0))
	}
	st.armedAt = due
}

// fire runs the heartbeats that are due; each reschedules its value.
func (st *Timers[B]) fire() {
	now := time.Now().UnixNano()
	var due []B
	st.mu.Lock()
	st.armedAt = 0
	for len(st.h) > 0 && st.h[0].HeartbeatTimer().due <= now {
		due = append(due, heap.Pop(&st.h).(B))
	}
	st.armLocked()
	st.mu.Unlock()
	for _, b := range due {
		b.Heartbeat()
	}
}
