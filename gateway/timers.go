//go:build !notimerheap

package gateway

import (
	"container/heap"
	"sync"
	"time"
)

// sessionTimers runs every session's heartbeat from one timer: a min-heap
// of the sessions' due times and a single time.Timer for the earliest. A
// timer of its own per session would cost every idle connection a runtime
// timer and a closure. A build with -tags notimerheap gives each session
// a timer instead (timers_off.go): the comparison in docs/benchmarks.md.
type sessionTimers struct {
	mu      sync.Mutex
	h       timerHeap
	timer   *time.Timer
	armedAt int64 // Unix ns the timer is set for; 0 when stopped
}

// heartbeatTimer is a session's place in the heap (under sessionTimers.mu).
type heartbeatTimer struct {
	pos int   // 1 + index in the heap; 0 when absent
	due int64 // Unix ns of the next heartbeat check
}

// timerHeap orders sessions by due time; each knows its place (hb.pos) so
// that it can be moved or removed.
type timerHeap []*session

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].hb.due < h[j].hb.due }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hb.pos, h[j].hb.pos = i+1, j+1
}
func (h *timerHeap) Push(x any) {
	s := x.(*session)
	*h = append(*h, s)
	s.hb.pos = len(*h)
}
func (h *timerHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.hb.pos = 0
	return s
}

// schedule sets s's heartbeat for due (Unix ns), adding or moving it.
func (st *sessionTimers) schedule(s *session, due int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s.hb.due = due
	if s.hb.pos > 0 {
		heap.Fix(&st.h, s.hb.pos-1)
	} else {
		heap.Push(&st.h, s)
	}
	st.armLocked()
}

// remove takes s out, if it is scheduled.
func (st *sessionTimers) remove(s *session) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if s.hb.pos > 0 {
		heap.Remove(&st.h, s.hb.pos-1)
		st.armLocked()
	}
}

// armLocked sets the timer for the earliest due time.
func (st *sessionTimers) armLocked() {
	if len(st.h) == 0 {
		if st.timer != nil && st.armedAt != 0 {
			st.timer.Stop()
			st.armedAt = 0
		}
		return
	}
	due := st.h[0].hb.due
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

// fire runs the heartbeats that are due; each reschedules its session.
func (st *sessionTimers) fire() {
	now := time.Now().UnixNano()
	var due []*session
	st.mu.Lock()
	st.armedAt = 0
	for len(st.h) > 0 && st.h[0].hb.due <= now {
		due = append(due, heap.Pop(&st.h).(*session))
	}
	st.armLocked()
	st.mu.Unlock()
	for _, s := range due {
		s.heartbeat()
	}
}
